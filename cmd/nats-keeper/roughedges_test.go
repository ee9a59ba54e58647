package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestUsageErrorsNameTheCommand: a usage error names the arguments the
// command takes and points at the command's own --help.
func TestUsageErrorsNameTheCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"snapshot-kept", "orders"}, []string{"snapshot-kept takes MODULE LOCAL (2 argument(s)), got 1: orders", "Run 'nats-keeper snapshot-kept --help' for usage."}},
		{[]string{"list", "a", "b", "c"}, []string{"list takes [MODULE [LOCAL]] (0 to 2 arguments), got 3: a b c", "Run 'nats-keeper list --help'"}},
		{[]string{"serve", "--no-such-flag"}, []string{"unknown flag: --no-such-flag", "Run 'nats-keeper serve --help'"}},
		{[]string{"no-such-verb"}, []string{`unknown command "no-such-verb"`, "Run 'nats-keeper --help'"}},
	} {
		code, _, errText := runArgs(t, c.args...)
		for _, w := range c.want {
			if code != exitUsage || !strings.Contains(errText, w) {
				t.Errorf("nats-keeper %s: exit %d, %q; want exit 2 and %q", strings.Join(c.args, " "), code, errText, w)
			}
		}
	}
}

// TestServeHelpSaysDirDefaultOnce: serve --help says --dir's default in
// its own words, and pflag does not add it a second time.
func TestServeHelpSaysDirDefaultOnce(t *testing.T) {
	code, out, errText := runArgs(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errText)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "--dir string") {
			if n := strings.Count(line, "(default"); n != 1 || !strings.Contains(line, "$NATS_KEEPER_DIR, else ./nats-keeper-data") {
				t.Fatalf("the --dir line says its default %d times: %s", n, line)
			}
			return
		}
	}
	t.Fatalf("serve --help has no --dir line:\n%s", out)
}

// TestContextAndServerRefused: --context and --server together are
// refused before any connection; a --context wins over $NATS_URL.
func TestContextAndServerRefused(t *testing.T) {
	code, _, errText := runArgs(t, "list", "--context", "prod", "--server", "nats://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(errText, "--context prod and --server nats://127.0.0.1:1 both say where to connect") ||
		strings.Contains(errText, "is NATS running") {
		t.Fatalf("exit %d: %s", code, errText)
	}
	c := connFlags{Server: "nats://from-env:4222", envURL: "nats://from-env:4222", Context: "no-such-context-here"}
	_, err := connect(context.Background(), c, "test", quietLog())
	if err == nil || !strings.Contains(err.Error(), `context "no-such-context-here"`) {
		t.Fatalf("a --context with $NATS_URL set did not use the context: %v", err)
	}
}

// TestListNoKeeperSaysTheBusAnswered: a bus that answers where no keeper
// serves (another account, another prefix) is not "no bus reachable".
func TestListNoKeeperSaysTheBusAnswered(t *testing.T) {
	s := natstest.Start(t, nil)
	code, _, errText := runArgs(t, "list", "--server", s.ClientURL(), "--timeout", "2s")
	if code != exitNoService || !strings.Contains(errText, "the bus answered, but no nats-keeper answers on mesh-broker.list-kept") ||
		strings.Contains(errText, "no bus reachable") || strings.Contains(errText, "is NATS running") {
		t.Fatalf("exit %d: %s", code, errText)
	}
}

// TestPrintSaidWords: a snapshot's positions are recorded, a restore's set
// back, and a restore from an aside names the aside, not an empty point.
func TestPrintSaidWords(t *testing.T) {
	taken := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	pos := []kept.Position{{Stream: "orders_data", Consumer: "orders-worker", AckFloor: 11}}
	var b bytes.Buffer
	_ = printSaid(&b, &kept.Reply{Said: "Took it.", Point: &kept.Point{Module: "orders", Local: "data", Form: 1, Fingerprint: "v2", Taken: taken}, Positions: pos})
	if out := b.String(); !strings.Contains(out, "1 consumer(s) recorded") || strings.Contains(out, "set back") || !strings.Contains(out, "orders/data form 1 before v2") {
		t.Errorf("snapshot:\n%s", out)
	}
	b.Reset()
	_ = printSaid(&b, &kept.Reply{Said: "Restored.", Point: &kept.Point{Module: "orders", Local: "data", Dir: "aside/orders.data.20261206T030000Z", Taken: taken},
		Positions: pos, Moves: []kept.Move{{}}})
	if out := b.String(); !strings.Contains(out, "from:      the set-aside copy aside/orders.data.20261206T030000Z of orders/data") ||
		strings.Contains(out, "before ,") || !strings.Contains(out, "1 consumer(s) set back") {
		t.Errorf("restore from an aside:\n%s", out)
	}
}

// TestDemoExplainsGapsAndUnacked: the demo says why a stream holds fewer
// messages than its sequences span, and why a consumer's next message is
// past its ack floor plus one.
func TestDemoExplainsGapsAndUnacked(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{deletedNote(49, 1, 50), " (1 deleted in between; a sequence is never reused)"},
		{deletedNote(50, 1, 50), ""},
		{unackedNote(11, 13), " (message 12 was delivered and waits for its ack)"},
		{unackedNote(11, 15), " (messages 12..14 were delivered and wait for their acks)"},
		{unackedNote(21, 22), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestPrintSaidCutOrMoment: a full point with At prints its cut; an
// incremental point and a moment's point (f<form>-at-…) print the moment.
func TestPrintSaidCutOrMoment(t *testing.T) {
	at := time.Date(2026, 12, 6, 3, 0, 0, 123456789, time.UTC)
	for _, c := range []struct {
		p         kept.Point
		want, not string
	}{
		{kept.Point{Module: "orders", Local: "data", Form: 1, Fingerprint: "v2", At: &at}, "cut:       2026-12-06T03:00:00.123456789Z", "moment:"},
		{kept.Point{Module: "orders", Local: "data", Form: 1, Fingerprint: "v2", At: &at, Incremental: true, Base: "b"}, "moment:    2026-12-06T03:00:00.123Z", "cut:"},
		{kept.Point{Module: "orders", Local: "data", Form: 1, Fingerprint: "at-20261206T030000.123Z", At: &at, Base: "b"}, "moment:", "cut:"},
	} {
		var b bytes.Buffer
		_ = printSaid(&b, &kept.Reply{Said: "Took it.", Point: &c.p})
		if out := b.String(); !strings.Contains(out, c.want) || strings.Contains(out, c.not) {
			t.Errorf("%+v:\n%s\nwant %q, not %q", c.p, out, c.want, c.not)
		}
	}
}
