package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestDiffCommand: nats-keeper diff through the whole command line and the
// service. Without a point it is a usage error; with --before or --from it
// prints the table of streams, the names, and the consumers; --json gives
// the reply, whose next page --after follows until every key was seen; the
// typed client gives the same counts.
func TestDiffCommand(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	var o outs
	if err := runSnapshot(ctx, snapshotOptions{Client: b.flags(), Out: o.output(), Module: "billing", Local: "ledger", Form: 3, Before: "9f2c1a7e"}); err != nil {
		t.Fatal(err)
	}
	kv, err := b.js.KeyValue(ctx, "billing_ledger")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := kv.PutString(ctx, fmt.Sprintf("new.%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.js.Publish(ctx, "billing.ledger.notes.1", []byte("after the point")); err != nil {
		t.Fatal(err)
	}

	if code, _, errText := runArgs(t, "diff", "billing", "ledger", "--server", b.url); code != exitUsage || !strings.Contains(errText, "before") {
		t.Fatalf("diff without a point: exit %d, stderr %s; want %d naming --before", code, errText, exitUsage)
	}
	if code, _, _ := runArgs(t, "diff", "billing", "ledger", "--before", "9f2c1a7e", "--from", "points/billing/ledger/f3-9f2c1a7e", "--server", b.url); code != exitUsage {
		t.Fatalf("diff with --before and --from: exit %d, want %d", code, exitUsage)
	}
	code, out, errText := runArgs(t, "diff", "billing", "ledger", "--form", "3", "--before", "9f2c1a7e", "--server", b.url)
	if code != exitOK {
		t.Fatalf("diff: exit %d, stderr %s", code, errText)
	}
	for _, want := range []string{"Since restore point billing/ledger f3-9f2c1a7e", "STREAM", "KV_billing_ledger", "5/0/0", "billing_ledger appended: 51",
		"KV_billing_ledger keys: +new.0 +new.1", "Consumers (acked up to):", "billing_reader"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff printed\n%s\nwithout %q", out, want)
		}
	}

	var keys []string
	after := ""
	for page := 0; ; page++ {
		args := []string{"diff", "billing", "ledger", "--from", "points/billing/ledger/f3-9f2c1a7e", "--limit", "2", "--json", "--server", b.url}
		if after != "" {
			args = append(args, "--after", after)
		}
		code, out, errText := runArgs(t, args...)
		if code != exitOK || page > 10 {
			t.Fatalf("diff --json page %d: exit %d, stderr %s", page, code, errText)
		}
		var rep kept.Reply
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("diff --json: %v\n%s", err, out)
		}
		for _, s := range rep.Streams {
			if s.Keys != nil {
				keys = append(keys, s.Keys.Names...)
			}
		}
		if rep.Next == "" {
			break
		}
		after = rep.Next
	}
	if want := []string{"+new.0", "+new.1", "+new.2", "+new.3", "+new.4"}; !slices.Equal(keys, want) {
		t.Errorf("the pages of --json named the keys %v, want %v", keys, want)
	}

	rep, err := verbs.NewClient(b.nc).DiffKept(ctx, kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c1a7e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Streams {
		if s.Stream == "KV_billing_ledger" && (s.Appended != 5 || s.Keys == nil || s.Keys.Added != 5) {
			t.Errorf("the typed client's diff of the bucket: %+v", s)
		}
	}
}
