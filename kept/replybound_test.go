package kept_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/kept"
)

func fatPoint(local string, positions int) kept.Point {
	p := kept.Point{Module: "m", Local: local, Form: 1, Fingerprint: "f", Dir: "points/m/" + local + "/f1-f"}
	cfg := json.RawMessage(fmt.Sprintf(`{"description":%q}`, strings.Repeat("x", 200)))
	for i := range positions {
		p.Positions = append(p.Positions, kept.Position{Stream: "S", Consumer: fmt.Sprintf("m-%d", i), Config: cfg})
	}
	return p
}

// A list-kept page over the bound because its points carry many positions
// keeps every point and cuts their positions; one over the bound by its
// number of points keeps the first ones and resumes right after the last
// shown, so no point is skipped. A reply under the bound is left alone.
func TestBoundReplyOfListPages(t *testing.T) {
	fat := &kept.Reply{Said: "a page", Total: 10, Next: "point.m.l2.1.f",
		Points: []kept.Point{fatPoint("l0", 2000), fatPoint("l1", 2000), fatPoint("l2", 2000)}}
	got := kept.BoundReply(kept.VerbList, fat, 200<<10)
	if len(got.Points) != 3 || got.Next != fat.Next || got.Cut == nil {
		t.Fatalf("fat page: %d points, next %q, cut %+v", len(got.Points), got.Next, got.Cut)
	}
	if l := got.Cut.Lists; len(l) != 1 || l[0].Name != "listed.positions" || l[0].Total != 6000 || l[0].Shown != 3*kept.ReplySample {
		t.Errorf("fat page cut %+v", l)
	}
	if len(fat.Points[0].Positions) != 2000 {
		t.Error("BoundReply changed the reply it was given")
	}

	many := &kept.Reply{Said: "a page", Total: 500, Next: "point.m.l099.1.f"}
	for i := range 100 {
		many.Points = append(many.Points, fatPoint(fmt.Sprintf("l%03d", i), 10))
	}
	got = kept.BoundReply(kept.VerbList, many, 100<<10)
	if len(got.Points) != kept.ReplySample || got.Next != "point.m.l019.1.f" {
		t.Fatalf("long page: %d points, next %q", len(got.Points), got.Next)
	}
	if body, _ := json.Marshal(got); len(body) > 100<<10 {
		t.Errorf("the cut page is %d bytes, over its bound", len(body))
	}
	if small := kept.BoundReply(kept.VerbList, many, 8<<20); small != many {
		t.Error("a reply under its bound was changed")
	}
}
