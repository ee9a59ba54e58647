package sample_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
)

func setup(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	_, _, js := jstest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, js
}

func allStreams(n sample.Names) []string { return append(n.Streams(), sample.SharedStream) }

func TestCreateDumpStableAndChange(t *testing.T) {
	ctx, js := setup(t)
	if err := sample.Create(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	a, err := sample.Dump(ctx, js, allStreams(n)...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sample.Dump(ctx, js, allStreams(n)...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(a, b); d != "" {
		t.Fatalf("two dumps of the same state differ:\n%s", d)
	}

	// What Create made.
	byName := map[string]sample.StreamDump{}
	for _, d := range a.Streams {
		if d.Missing {
			t.Fatalf("stream %s missing", d.Name)
		}
		byName[d.Name] = d
	}
	st := byName[n.Stream]
	if st.Msgs != 49 || st.LastSeq != 50 {
		t.Fatalf("stream %s: msgs %d last %d, want 49 and 50", n.Stream, st.Msgs, st.LastSeq)
	}
	cons := map[string]sample.ConsumerDump{}
	for _, c := range st.Consumers {
		cons[c.Name] = c
	}
	if r := cons[n.Reader]; r.AckFloor != 21 || r.Next != 22 {
		t.Fatalf("reader: %+v, want ack floor 21 next 22 (message 10 is deleted)", r)
	}
	if au := cons[n.Audit]; au.AckFloor == 0 || au.AckFloor == cons[n.Reader].AckFloor || au.Next <= au.AckFloor {
		t.Fatalf("audit: %+v", au)
	}
	if len(st.Messages[0].Header["Sample-N"]) != 1 {
		t.Fatalf("message 1 headers: %v", st.Messages[0].Header)
	}
	ev := map[string]sample.ConsumerDump{}
	for _, c := range byName[sample.SharedStream].Consumers {
		ev[c.Name] = c
	}
	if ev[n.Events].AckFloor == 0 || ev[sample.OtherConsumer].AckFloor != 3 {
		t.Fatalf("shared consumers: %+v", ev)
	}
	kv, err := sample.KV(ctx, js, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := kv["tmp.a"]; ok {
		t.Fatal("tmp.a should be deleted")
	}
	if _, ok := kv["gone"]; ok {
		t.Fatal("gone should be purged")
	}
	if e := kv["user.3"]; !strings.HasPrefix(e.Value, "user 3 rev 3") || e.Revision < 17 {
		t.Fatalf("user.3 = %+v", e)
	}
	big, err := sample.Object(ctx, js, n.Bus, sample.BigObject)
	if err != nil {
		t.Fatal(err)
	}
	if len(big) != sample.BigSize {
		t.Fatalf("big object is %d bytes, want %d", len(big), sample.BigSize)
	}

	if err := sample.Change(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	c, err := sample.Dump(ctx, js, allStreams(n)...)
	if err != nil {
		t.Fatal(err)
	}
	d := sample.Diff(a, c)
	for _, want := range []string{n.KVStream, n.ObjStrm, n.Stream + " consumer " + n.Reader,
		n.Stream + " consumer " + n.Audit, sample.SharedStream + " consumer " + n.Events} {
		if !strings.Contains(d, want) {
			t.Errorf("diff after Change does not mention %q:\n%s", want, d)
		}
	}
	big2, err := sample.Object(ctx, js, n.Bus, sample.BigObject)
	if err != nil {
		t.Fatal(err)
	}
	if len(big2) != sample.BigChangedSize {
		t.Fatalf("changed big object is %d bytes", len(big2))
	}
	kv2, err := sample.KV(ctx, js, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := kv2["user.4"]; ok || kv2["new.1"].Value != "new one" {
		t.Fatalf("KV after change: %v", kv2)
	}
}

func TestTwoModulesSideBySide(t *testing.T) {
	ctx, js := setup(t)
	if err := sample.Create(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	other := func() *sample.Snapshot {
		s, err := sample.Dump(ctx, js, sample.SharedStream)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Streams[0].Consumers {
			if c.Name == sample.OtherConsumer {
				return &sample.Snapshot{Streams: []sample.StreamDump{{Name: "x", Consumers: []sample.ConsumerDump{{Name: c.Name, AckFloor: c.AckFloor}}}}}
			}
		}
		t.Fatal("other-events missing")
		return nil
	}
	before := other()
	if err := sample.Create(ctx, js, "shipping", "parcels"); err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, other()); d != "" {
		t.Fatalf("second module moved %s:\n%s", sample.OtherConsumer, d)
	}
	s, err := sample.Dump(ctx, js, sample.NamesOf("shipping", "parcels").Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Streams {
		if d.Missing || d.Msgs == 0 {
			t.Fatalf("stream %s of the second module: %+v", d.Name, d)
		}
	}
	if err := sample.Create(ctx, js, "other", "x"); err == nil {
		t.Fatal("module other would own other-events and was accepted")
	}
	if err := sample.Create(ctx, js, "a.b", "x"); err == nil {
		t.Fatal("a dotted module name was accepted")
	}
}

func TestDumpMissingStream(t *testing.T) {
	ctx, js := setup(t)
	s, err := sample.Dump(ctx, js, "NOPE")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Streams[0].Missing {
		t.Fatal("missing stream not marked missing")
	}
	if sample.Diff(s, &sample.Snapshot{}) == "" {
		t.Fatal("a missing stream and no stream dump the same")
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		f, s string
		want bool
	}{
		{"a.b", "a.b", true}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.>", "a.b.c", true},
		{"a.>", "a", false}, {">", "a", true}, {"a.b.c", "a.b", false}, {"*.b", "a.c", false},
	} {
		if got := sample.SubjectMatches(c.f, c.s); got != c.want {
			t.Errorf("SubjectMatches(%q, %q) = %v", c.f, c.s, got)
		}
	}
}

func FuzzSubjectMatches(f *testing.F) {
	f.Add("a.*.>", "a.b.c")
	f.Fuzz(func(t *testing.T, filter, subject string) {
		got := sample.SubjectMatches(filter, subject)
		if !strings.ContainsAny(subject, "*>") && filter == subject && !got {
			t.Fatalf("%q does not match itself", subject)
		}
		if got && !sample.SubjectMatches(">", subject) && subject != "" {
			t.Fatalf("%q matches %q but not >", subject, filter)
		}
	})
}
