package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// `nats-keeper acts` reads the trail back: one line per act, oldest first,
// filtered by module and kept data and by --since; --json prints one
// object per line; a message on the acts subjects that is no act is shown
// as such, its control characters escaped.
func TestActsCommandReadsTheTrail(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	for _, m := range []string{"billing", "orders"} {
		if err := sample.Create(ctx, b.js, m, "ledger"); err != nil {
			t.Fatal(err)
		}
	}
	c := verbs.NewClient(b.nc, verbs.WithTimeout(time.Minute))
	for _, m := range []string{"billing", "orders"} {
		if _, err := c.SnapshotKept(ctx, kept.Request{Module: m, Local: "ledger", Form: 1, Fingerprint: "a", Caller: "ops-jane", Why: "before release 42"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.js.Publish(ctx, verbs.DefaultPrefix+".acts.snapshot-kept", []byte("not json\x1b[31m")); err != nil {
		t.Fatal(err)
	}

	code, out, errs := runArgs(t, "acts", "--server", b.url)
	if code != 0 {
		t.Fatalf("acts: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "snapshot-kept  billing/ledger  done  ops-jane  ") ||
		!strings.Contains(lines[0], "why: before release 42") ||
		!strings.Contains(lines[0], "bus says: ") || !strings.Contains(lines[0], "(the bus gave no identity; the keeper's own connection)") || !strings.Contains(lines[1], "orders/ledger") ||
		!strings.Contains(lines[2], "is not an act") || strings.Contains(out, "\x1b") || !strings.Contains(lines[2], `\x1b[31m`) {
		t.Fatalf("acts printed:\n%s", out)
	}

	code, out, errs = runArgs(t, "acts", "billing", "ledger", "--json", "--server", b.url)
	if code != 0 {
		t.Fatalf("acts billing ledger --json: exit %d: %s", code, errs)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Fatalf("acts billing ledger --json printed %d lines, want 1:\n%s", len(lines), out)
	}
	var got struct {
		Seq    uint64    `json:"seq"`
		Stored time.Time `json:"stored"`
		kept.Act
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Seq == 0 || got.Stored.IsZero() || got.ID == "" || got.Verb != kept.VerbSnapshot || got.Module != "billing" || got.Outcome != "done" {
		t.Fatalf("the JSON line reads %+v", got)
	}

	code, out, _ = runArgs(t, "acts", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--server", b.url)
	if code != 0 || strings.TrimSpace(out) != "No acts." {
		t.Fatalf("acts since an hour from now: exit %d, %q", code, out)
	}
	code, out, _ = runArgs(t, "acts", "--since", "1h", "--server", b.url)
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("acts --since 1h: exit %d:\n%s", code, out)
	}
	if code, _, errs := runArgs(t, "acts", "--since", "yesterday", "--server", b.url); code != exitUsage || !strings.Contains(errs, "neither a duration") {
		t.Fatalf("acts --since yesterday: exit %d: %s", code, errs)
	}
	if code, _, errs := runArgs(t, "acts", "a b", "--server", b.url); code != exitUsage {
		t.Fatalf("acts with a module that is not a plain name: exit %d: %s", code, errs)
	}
	if code, _, errs := runArgs(t, "acts", "--prefix", "other", "--server", b.url); code != exitNotFound || !strings.Contains(errs, "no acts stream KEEPER_ACTS_other") {
		t.Fatalf("acts of a prefix no keeper used: exit %d: %s", code, errs)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"90m":                  now.Add(-90 * time.Minute),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"2026-11-30T12:00:00Z": time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1h", "0s", "soon"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q) took it", bad)
		}
	}
}
