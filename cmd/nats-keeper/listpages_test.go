package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// nats-keeper list follows list-kept's pages, so people see every point
// as one listing, in text and with --json: 1,200 points take three pages
// of the default 500.
func TestListFollowsPages(t *testing.T) {
	b := newBedWith(t, func(*keeper.Config) {})
	ctx := context.Background()
	a := b.bus
	const n = 1200
	for i := range n {
		local := fmt.Sprintf("l%04d", i)
		p, _ := json.Marshal(kept.Point{Module: "many", Local: local, Form: 1, Fingerprint: "f", Dir: "points/many/" + local + "/f1-f", ArchiveSize: 1024})
		if err := a.Put(ctx, "point.many."+local+".1.f", p); err != nil {
			t.Fatal(err)
		}
	}
	f := b.flags()
	f.JSON = true
	var o outs
	if err := runList(ctx, listOptions{Client: f, Out: o.output(), Module: "many"}); err != nil {
		t.Fatalf("list --json: %v", err)
	}
	var rep kept.Reply
	if err := json.Unmarshal(o.out.Bytes(), &rep); err != nil {
		t.Fatalf("list --json printed %.200q: %v", o.out.String(), err)
	}
	if len(rep.Points) != n || rep.Total != n || rep.Next != "" || rep.TotalBytes != n*1024 {
		t.Fatalf("list --json gave %d points, total %d, next %q, %d bytes; want %d, all", len(rep.Points), rep.Total, rep.Next, rep.TotalBytes, n)
	}
	for i, p := range rep.Points {
		if want := fmt.Sprintf("l%04d", i); p.Local != want {
			t.Fatalf("point %d is %s, want %s: a page was lost or repeated", i, p.Local, want)
		}
	}
	code, out, errText := runArgs(t, "list", "many", "--server", b.url)
	if code != 0 || !strings.Contains(out, "1200 restore point(s) and 0 set-aside copy(ies) of many") || !strings.Contains(out, "l1199") {
		t.Fatalf("list: exit %d, err %s, out %.300s", code, errText, out)
	}
}
