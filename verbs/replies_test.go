package verbs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/kept"
)

// manyPositions is a restore's reply with n positions, each with a
// consumer configuration of about 600 bytes: 2,000 of them pass the
// default max payload of 1 MiB.
func manyPositions(n int) *kept.Reply {
	cfg := json.RawMessage(fmt.Sprintf(`{"durable_name":"c","description":%q}`, strings.Repeat("x", 560)))
	rep := &kept.Reply{Said: "Restored billing/ledger.", Aside: &kept.Aside{ID: "billing.ledger.20260101T000000", Module: "billing", Local: "ledger", Dir: "aside/billing.ledger.20260101T000000"},
		Point: &kept.Point{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f", Dir: "points/billing/ledger/f3-f"}, CatchUp: "migrate"}
	for i := range n {
		p := kept.Position{Stream: "ORDERS", Consumer: fmt.Sprintf("billing-%04d", i), AckFloor: uint64(i), Config: cfg}
		rep.Positions = append(rep.Positions, p)
		rep.Point.Positions = append(rep.Point.Positions, p)
		rep.Moves = append(rep.Moves, kept.Move{Stream: "ORDERS", Consumer: p.Consumer, To: p.AckFloor, By: kept.MoveReset})
	}
	return rep
}

// A reply over the connection's max payload reaches the caller cut, with
// a sample of each long list, how many each holds, and where the whole is,
// instead of never (the verb was done, and the caller waited out its
// timeout). The engine is told the bound, read from the connection.
func TestAReplyOverTheMaxPayloadArrivesCut(t *testing.T) {
	var bound int
	logs := &syncbuf.Buffer{}
	nc, _ := startFake(t, func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		bound, _ = kept.ReplyBound(ctx)
		return manyPositions(2000), nil
	}, WithLogger(textLog(logs)))
	whole, _ := json.Marshal(manyPositions(2000))
	if int64(len(whole)) <= nc.MaxPayload() {
		t.Fatalf("the reply is %d bytes, not over the max payload %d: the test proves nothing", len(whole), nc.MaxPayload())
	}
	c := NewClient(nc, WithTimeout(time.Minute))
	rep, err := c.RestoreKept(t.Context(), kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f", Why: "test"})
	if err != nil {
		t.Fatalf("the verb was done but the caller got: %v", err)
	}
	if want := int(nc.MaxPayload()) - replyMargin; bound != want {
		t.Errorf("the engine was told a reply bound of %d, want the max payload less the margin, %d", bound, want)
	}
	if rep.Cut == nil || rep.Cut.Short {
		t.Fatalf("reply not marked cut (or short): %+v", rep.Cut)
	}
	if len(rep.Positions) != kept.ReplySample || len(rep.Moves) != kept.ReplySample || len(rep.Point.Positions) != kept.ReplySample {
		t.Errorf("cut reply shows %d positions, %d moves, %d point positions; want %d each",
			len(rep.Positions), len(rep.Moves), len(rep.Point.Positions), kept.ReplySample)
	}
	lists := map[string]kept.CutList{}
	for _, l := range rep.Cut.Lists {
		lists[l.Name] = l
	}
	for _, name := range []string{"positions", "moves", "point.positions"} {
		if l := lists[name]; l.Total != 2000 || l.Shown != kept.ReplySample {
			t.Errorf("cut list %s = %+v, want 2000 in all, %d shown", name, l, kept.ReplySample)
		}
	}
	for _, want := range []string{"points/billing/ledger/f3-f", "cut to fit"} {
		if !strings.Contains(rep.Said, want) {
			t.Errorf("said %q does not say %q", rep.Said, want)
		}
	}
	if rep.Aside == nil || rep.Aside.ID != "billing.ledger.20260101T000000" || rep.CatchUp != "migrate" {
		t.Errorf("the cut reply lost the aside id or catch-up: %+v %q", rep.Aside, rep.CatchUp)
	}
	// A cut reply is the reply working as documented: no warning.
	if got := logs.String(); !strings.Contains(got, `level=INFO msg="the reply was over the connection's max payload and was cut"`) || strings.Contains(got, "level=WARN") {
		t.Errorf("the keeper's log of a cut reply, want it at INFO and no WARN:\n%s", got)
	}
}

// textLog is a text logger writing into b.
func textLog(b *syncbuf.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// A reply that is over the max payload even cut (here, its sentence alone)
// reaches the caller as a short reply that says the verb was done and names
// what it made.
func TestAReplyThatCannotBeCutArrivesShort(t *testing.T) {
	logs := &syncbuf.Buffer{}
	nc, _ := startFake(t, func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		rep := manyPositions(3)
		rep.Said = strings.Repeat("a very long sentence ", 100_000)
		return rep, nil
	}, WithLogger(textLog(logs)))
	c := NewClient(nc, WithTimeout(time.Minute))
	rep, err := c.RestoreKept(t.Context(), kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f", Why: "test"})
	if err != nil {
		t.Fatalf("the verb was done but the caller got: %v", err)
	}
	if rep.Cut == nil || !rep.Cut.Short {
		t.Fatalf("reply not marked short: %+v", rep.Cut)
	}
	body, _ := json.Marshal(rep)
	if len(body) > 8<<10 {
		t.Errorf("the short reply is %d bytes", len(body))
	}
	if !strings.HasPrefix(rep.Said, "restore-kept was done") {
		t.Errorf("short reply said %q", rep.Said[:min(len(rep.Said), 200)])
	}
	if rep.Aside == nil || rep.Aside.ID != "billing.ledger.20260101T000000" || rep.Point == nil || rep.Point.Dir != "points/billing/ledger/f3-f" || len(rep.Positions) != 0 {
		t.Errorf("short reply does not name what was made, or carries lists: %+v %+v", rep.Aside, rep.Point)
	}
	if got := logs.String(); !strings.Contains(got, `level=WARN msg="the reply was over the connection's max payload even when cut; the short reply was sent"`) {
		t.Errorf("the keeper's log of a short reply, want a WARN:\n%s", got[:min(len(got), 2000)])
	}
}

// ListAllKept follows list-kept's pages and joins them: every point once,
// in order, with totals over all of them, and the captures the first page
// lists.
func TestListAllKeptFollowsPages(t *testing.T) {
	var all []kept.Point
	for i := range 7 {
		all = append(all, kept.Point{Module: "m", Local: fmt.Sprintf("l%d", i), Form: 1, Fingerprint: "f", ArchiveSize: 10})
	}
	key := func(p kept.Point) string { return "point.m." + p.Local + ".1.f" }
	asked := 0
	nc, _ := startFake(t, func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		asked++
		rep := &kept.Reply{Said: "a page", Total: len(all)}
		if r.After == "" { // the keeper lists the captures on the first page
			rep.Captures = []kept.CaptureInfo{{Module: "m", Local: "l0", On: true, Segments: 4, Bases: 1}}
		}
		for _, p := range all {
			if key(p) > r.After && len(rep.Points) < r.Limit {
				rep.Points = append(rep.Points, p)
			}
		}
		if last := rep.Points[len(rep.Points)-1]; key(last) != key(all[len(all)-1]) {
			rep.Next = key(last)
		}
		return rep, nil
	})
	c := NewClient(nc, WithTimeout(time.Minute))
	rep, err := c.ListAllKept(t.Context(), kept.Request{Module: "m", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if asked != 3 {
		t.Errorf("asked %d pages of 3 for 7 points, want 3", asked)
	}
	if len(rep.Points) != 7 || rep.Points[6].Local != "l6" || rep.TotalBytes != 70 || rep.Next != "" {
		t.Errorf("joined %d points (last %+v), %d bytes, next %q", len(rep.Points), rep.Points[len(rep.Points)-1], rep.TotalBytes, rep.Next)
	}
	if !strings.HasPrefix(rep.Said, "7 restore point(s) and 0 set-aside copy(ies) of m") {
		t.Errorf("said %q", rep.Said)
	}
	if len(rep.Captures) != 1 || rep.Captures[0].Local != "l0" || rep.Captures[0].Segments != 4 {
		t.Errorf("joined the captures %+v, want the first page's one", rep.Captures)
	}
}
