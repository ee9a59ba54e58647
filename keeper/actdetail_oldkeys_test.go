package keeper

import (
	"fmt"
	"testing"
	"time"
)

// TestPointDetailAsBefore: a snapshot's act keeps its detail (which verbs'
// follow reads to know the point was taken) for every point whose detail
// the release before kept: the 64 KiB bound is measured on the old keys
// only, not on the new and old keys written side by side. A point of 500
// streams fitted before the wire casing, not after it.
func TestPointDetailAsBefore(t *testing.T) {
	p := &Point{Module: "orders", Local: "main", Form: 3, Fingerprint: "add-index-2026", Taken: time.Unix(1, 0).UTC(),
		Dir: "points/orders/main/f3-add-index-2026", ArchiveSize: 123456789, ArchiveSum: "0123456789abcdef0123456789abcdef", PositionCount: 10}
	for i := range 500 {
		p.Streams = append(p.Streams, StreamSum{Name: fmt.Sprintf("KEEP_orders_%04d", i), Messages: 1234567, Bytes: 987654321,
			FirstSeq: 1000001, LastSeq: 2234567, Consumers: 2})
	}
	if pointDetail(&Reply{Said: "snapshot-kept took a point of 500 streams.", Point: p}) == nil {
		t.Fatal("a point of 500 streams has no act detail; the release before kept it")
	}
	for i := range 200 {
		p.Streams = append(p.Streams, StreamSum{Name: fmt.Sprintf("KEEP_more_%04d", i), Messages: 1234567, Bytes: 987654321,
			FirstSeq: 1000001, LastSeq: 2234567, Consumers: 2})
	}
	if pointDetail(&Reply{Said: "snapshot-kept took a point of 700 streams.", Point: p}) != nil {
		t.Fatal("a point of 700 streams has an act detail; the release before kept none")
	}
}
