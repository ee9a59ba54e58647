package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestDiscardPointCommand: discard-point through the whole command line
// and the typed client. Without --why it is a usage error (exit 2) and
// nothing is removed; with it the point goes from the store and from
// list; a second time it is not found (exit 3); the typed client's
// request without why is refused by the keeper with a 400.
func TestDiscardPointCommand(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	var o outs
	if err := runSnapshot(ctx, snapshotOptions{Client: b.flags(), Out: o.output(), Module: "billing", Local: "ledger", Form: 3, Before: "9f2c1a7e"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.dir, "points", "billing", "ledger", "f3-9f2c1a7e")
	point := []string{"discard-point", "billing", "ledger", "--form", "3", "--before", "9f2c1a7e", "--server", b.url}
	if code, _, errText := runArgs(t, point...); code != exitUsage || !strings.Contains(errText, "why") {
		t.Fatalf("discard-point without --why: exit %d, stderr %s; want %d naming --why", code, errText, exitUsage)
	}
	c := verbs.NewClient(b.nc)
	_, err := c.DiscardPoint(ctx, kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c1a7e"})
	if !errors.Is(err, kept.ErrBadRequest) || !strings.Contains(err.Error(), "why is required for discard-point") {
		t.Fatalf("the typed client's discard-point without why: %v; want a 400", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bus.tar")); err != nil {
		t.Fatalf("a refused discard-point touched the point: %v", err)
	}
	code, out, errText := runArgs(t, append(point, "--why", "KV_billing_ledger moves to another kept data")...)
	if code != exitOK || !strings.Contains(out, "Discarded restore point billing/ledger f3-9f2c1a7e") {
		t.Fatalf("discard-point: exit %d, out %s, err %s", code, out, errText)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the point's directory is still there: %v", err)
	}
	if code, out, _ := runArgs(t, "list", "billing", "ledger", "--server", b.url); code != exitOK || strings.Contains(out, "9f2c1a7e") {
		t.Errorf("list after discard-point: exit %d, out %s", code, out)
	}
	if code, _, errText := runArgs(t, append(point, "--why", "again")...); code != exitNotFound {
		t.Errorf("discard-point again: exit %d, stderr %s; want %d", code, errText, exitNotFound)
	}
}
