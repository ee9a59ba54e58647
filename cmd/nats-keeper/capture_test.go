package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestCaptureCommand: nats-keeper capture through the whole command line
// and a serving keeper. Neither or both of --on and --off, and --off with a
// setting, are usage errors; --on prints the capture and its settings;
// list shows the capture, its window, bytes, segments and bases, once the
// keeper has written them; restore-kept --at and guard --at restore a
// moment of the window; --off is listed off.
func TestCaptureCommand(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	for _, flags := range [][]string{nil, {"--on", "--off"}, {"--off", "--window", "1h"}} {
		args := append([]string{"capture", "billing", "ledger", "--server", b.url}, flags...)
		if code, _, errText := runArgs(t, args...); code != exitUsage || !strings.Contains(errText, "--o") {
			t.Errorf("%v: exit %d, stderr %s; want %d naming --on or --off", flags, code, errText, exitUsage)
		}
	}
	if rep, err := verbs.NewClient(b.nc).ListKept(ctx, kept.Request{Module: "billing"}); err != nil || len(rep.Captures) != 0 {
		t.Fatalf("a refused capture turned something on: %+v, %v", rep, err)
	}

	on := time.Now()
	code, out, errText := runArgs(t, "capture", "billing", "ledger", "--on", "--segment-every", "1s", "--window", "2h", "--why", "testing", "--server", b.url)
	if code != exitOK {
		t.Fatalf("capture --on: exit %d, stderr %s", code, errText)
	}
	mustContain(t, "capture --on", out, "Capture of billing/ledger is on", "capture:   on, a segment every 1s or 8.0 MiB, a new base every 1d, a window of 2h")

	// The serving keeper takes the capture up at its next tick (2 s) and
	// takes a base; then it writes segments of what the stream gains.
	captureListed(t, b, func(c kept.CaptureInfo) bool { return c.Bases > 0 })
	if _, err := b.js.Publish(ctx, "billing.ledger.notes.1", []byte("captured")); err != nil {
		t.Fatal(err)
	}
	published := time.Now()
	c := captureListed(t, b, func(c kept.CaptureInfo) bool { return c.To != nil && c.To.After(published) && c.Bytes > 0 })
	if !c.On || c.Bases != 1 || c.Bytes == 0 || c.From == nil || c.Settings.Window != kept.Duration(2*time.Hour) {
		t.Errorf("list-kept's capture: %+v", c)
	}
	code, out, errText = runArgs(t, "list", "billing", "--server", b.url)
	if code != exitOK {
		t.Fatalf("list: exit %d, stderr %s", code, errText)
	}
	row := regexp.MustCompile(`(?m)^  billing +ledger +on +\d{4}-\d\d-\d\dT[0-9:.]+Z\.\.\d{4}-\d\d-\d\dT[0-9:.]+Z +[0-9.]+m?s +[0-9.]+ [KM]?i?B +[1-9]\d* +1$`)
	if !strings.Contains(out, "Captured (") || !row.MatchString(out) {
		t.Errorf("list printed no row of the capture:\n%s", out)
	}

	// A restore to the window's end (auto: the stream only gained since,
	// so a delta, whose aside names the point of the moment: it is made),
	// and how old the positions it set back were.
	at := c.To.UTC().Format(time.RFC3339Nano)
	code, out, errText = runArgs(t, "restore-kept", "billing", "ledger", "--at", at, "--why", "test", "--server", b.url)
	if code != exitOK {
		t.Fatalf("restore-kept --at %s: exit %d, stderr %s", at, code, errText)
	}
	mustContain(t, "restore-kept --at", out, "The point of the moment "+at, "rolled back by delta", "moment:    ", "sampled:   the consumer positions are those sampled", "aside:")
	// Outside the window: refused, naming it.
	code, _, errText = runArgs(t, "restore-kept", "billing", "ledger", "--at", on.Add(-time.Hour).UTC().Format(time.RFC3339), "--why", "test", "--server", b.url)
	if code != exitNotFound || !strings.Contains(errText, "the captured window is") {
		t.Errorf("restore-kept --at before the window: exit %d, stderr %s; want %d naming the window", code, errText, exitNotFound)
	}

	// guard --at: a bad moment is refused before the point is taken; a
	// failed command is undone to the moment.
	code, _, errText = runArgs(t, "guard", "billing", "ledger", "--form", "1", "--before", "g1", "--at", "yesterday", "--server", b.url, "--", "false")
	if code != exitUsage || !strings.Contains(errText, "not an RFC 3339 time") {
		t.Errorf("guard --at yesterday: exit %d, stderr %s; want %d", code, errText, exitUsage)
	}
	code, out, errText = runArgs(t, "guard", "billing", "ledger", "--form", "1", "--before", "g2", "--at", at, "--server", b.url, "--", "false")
	if code != 1 || !strings.Contains(out, "so the kept data was restored to the moment "+at) {
		t.Errorf("guard --at %s -- false: exit %d, out %s, stderr %s", at, code, out, errText)
	}

	code, out, errText = runArgs(t, "capture", "billing", "ledger", "--off", "--json", "--server", b.url)
	var rep kept.Reply
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Capture == nil || rep.Capture.On {
		t.Fatalf("capture --off --json: exit %d, out %s, stderr %s", code, out, errText)
	}
	if c := captureListed(t, b, func(c kept.CaptureInfo) bool { return !c.On }); c.Bases != 1 {
		t.Errorf("capture off lost what was kept: %+v", c)
	}
}

// captureListed is billing/ledger's capture as list --json gives it, once
// ready says it is (within 30 s).
func captureListed(t *testing.T, b *bed, ready func(kept.CaptureInfo) bool) kept.CaptureInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a guard against hanging, not a measurement
	for {
		code, out, errText := runArgs(t, "list", "billing", "ledger", "--json", "--server", b.url)
		var rep kept.Reply
		if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("list --json: exit %d, out %s, stderr %s", code, out, errText)
		}
		for _, c := range rep.Captures {
			if c.Module == "billing" && c.Local == "ledger" && ready(c) {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("list never showed the capture ready: %+v", rep.Captures)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRestoreAtRefusals: restore-kept --at or --at-seq with what names a
// point, or an --at-seq that is not STREAM=N, is refused before anything is
// sent (no server answers here), with exit 2 and a sentence naming it.
func TestRestoreAtRefusals(t *testing.T) {
	at := "2026-12-06T10:30:00Z"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--at", at, "--from", "points/billing/ledger/f3-x"}, "takes no --from, --before"},
		{[]string{"--at", at, "--form", "3", "--before", "x"}, "takes no --from, --before"},
		{[]string{"--at-seq", "KV_billing_ledger=4", "--aside-only"}, "--aside-only"},
		{[]string{"--at", at, "--at-seq", "KV_billing_ledger=4"}, "--at or --at-seq, not both"},
		{[]string{"--at-seq", "x"}, `--at-seq "x" is not STREAM=N`},
		{[]string{"--at-seq", "x="}, `--at-seq "x=" is not STREAM=N`},
		{[]string{"--at-seq", "=4"}, `--at-seq "=4" is not STREAM=N`},
		{[]string{"--at-seq", "x=0"}, `--at-seq "x=0" is not STREAM=N`},
		{[]string{"--at-seq", "x=-1"}, `--at-seq "x=-1" is not STREAM=N`},
		{[]string{"--at-seq", "x=1", "--at-seq", "x=2"}, `names the stream "x" twice`},
		{[]string{"--at", "10:30"}, "not an RFC 3339 time"},
	} {
		args := append([]string{"restore-kept", "billing", "ledger", "--why", "test", "--server", "nats://127.0.0.1:1"}, c.args...)
		code, _, errText := runArgs(t, args...)
		if code != exitUsage || !strings.Contains(errText, c.want) || !strings.Contains(errText, "nothing was done") {
			t.Errorf("%v: exit %d, stderr %s; want %d saying %q", c.args, code, errText, exitUsage, c.want)
		}
	}
}

// A capture's lag and a positions sample's age read as a person would say
// them.
func TestCaptureLagText(t *testing.T) {
	for ms, want := range map[int64]string{0: "0s", 20: "20ms", 1234: "1.2s", 61_000: "1m1s", 90 * 60_000: "1h30m", 26 * 3600_000: "1d2h"} {
		if got := msText(ms); got != want {
			t.Errorf("msText(%d) = %q, want %q", ms, got, want)
		}
	}
}
