package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/kept"
)

// TestUnknownVerbIsNotFound: a request on <prefix>.<a misspelled verb> is
// answered 404 with a sentence naming the verbs, as `nats request` shows
// it; every request for a real verb still reaches the verb (the 404's
// subscription is in its own queue group); the keeper's own acts and
// progress subjects are never answered by it.
func TestUnknownVerbIsNotFound(t *testing.T) {
	nc, _ := startFake(t, func(context.Context, string, kept.Request) (*kept.Reply, error) {
		return &kept.Reply{Said: "listed"}, nil
	})
	msg, err := nc.Request(DefaultPrefix+".snapshot-kep", []byte(`{}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	said := msg.Header.Get(micro.ErrorHeader)
	if msg.Header.Get(micro.ErrorCodeHeader) != "404" || !strings.Contains(said, `"snapshot-kep" is not a verb`) ||
		!strings.Contains(said, "snapshot-kept, restore-kept") || !strings.Contains(string(msg.Data), `"code":404`) {
		t.Fatalf("a misspelled verb got %q %q, body %s", msg.Header.Get(micro.ErrorCodeHeader), said, msg.Data)
	}
	c := NewClient(nc)
	for i := range 30 {
		rep, err := c.ListKept(context.Background(), kept.Request{})
		if err != nil || rep.Said != "listed" {
			t.Fatalf("list-kept request %d: %v %+v", i, err, rep)
		}
	}
	for _, subject := range []string{DefaultPrefix + ".acts", DefaultPrefix + ".progress"} {
		_, err := nc.Request(subject, nil, 300*time.Millisecond)
		if !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("a request on the keeper's own %s was answered: %v", subject, err)
		}
	}
}

// TestDecodeSaysWholeNumber: a form sent as a string is refused in words
// ("a whole number"), not as Go's type name ("a int").
func TestDecodeSaysWholeNumber(t *testing.T) {
	_, err := DecodeRequest(kept.VerbSnapshot, []byte(`{"module":"a","local":"b","form":"3","fingerprint":"x"}`))
	if err == nil || !strings.Contains(err.Error(), `"form" must be a whole number, not a JSON string`) || strings.Contains(err.Error(), "a int") {
		t.Fatalf("got %v", err)
	}
	_, err = DecodeRequest(kept.VerbRestore, []byte(`{"module":"a","local":"b","dry-run":"yes"}`))
	if err == nil || !strings.Contains(err.Error(), `"dry-run" must be true or false`) {
		t.Fatalf("got %v", err)
	}
}

// TestDiscardAsideTakesTheID: the typed client's DiscardAside sends its id
// parameter as the request's from; the older call with the id in r.From
// still works; an id and a different r.From are refused and nothing is sent.
func TestDiscardAsideTakesTheID(t *testing.T) {
	var got []string
	nc, _ := startFake(t, func(_ context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		got = append(got, verb+" "+r.From+" "+r.Why)
		return &kept.Reply{Said: "discarded"}, nil
	})
	c := NewClient(nc)
	ctx := context.Background()
	if _, err := c.DiscardAside(ctx, "orders.data.20261206T030000Z", kept.Request{Why: "checked"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiscardAside(ctx, "", kept.Request{From: "orders.data.20261206T040000Z", Why: "older caller"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.DiscardAside(ctx, "orders.data.20261206T030000Z", kept.Request{From: "other", Why: "x"})
	if !errors.Is(err, kept.ErrBadRequest) {
		t.Fatalf("an id and another from: %v", err)
	}
	if _, err := c.DiscardAside(ctx, "", kept.Request{Why: "x"}); !errors.Is(err, kept.ErrBadRequest) {
		t.Fatalf("no id: %v", err)
	}
	want := []string{kept.VerbDiscard + " orders.data.20261206T030000Z checked", kept.VerbDiscard + " orders.data.20261206T040000Z older caller"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the keeper got %q; want %q", got, want)
	}
}
