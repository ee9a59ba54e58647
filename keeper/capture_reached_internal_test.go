package keeper

import (
	"testing"
	"time"
)

// A segment takes the capture's window to when its round read the
// streams' last sequences; one cut at its bytes, to just before the first
// message it left in the stream it was cut in, or, for a stream it did not
// reach, no further than the mark; never back.
func TestSegmentReached(t *testing.T) {
	marked := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	began := marked.Add(2 * time.Second)
	last := marked.Add(time.Second)
	c := &capturer{marked: marked}
	all := segmentStream{Name: "a", From: 11, To: 20, Through: 20, Messages: 10, LastTime: last.UnixNano()}
	cutIn := segmentStream{Name: "b", From: 5, To: 9, Through: 30, Messages: 5, LastTime: last.UnixNano()}
	unread := segmentStream{Name: "c", From: 7, To: 6, Through: 12}
	for _, tc := range []struct {
		name    string
		streams []segmentStream
		want    time.Time
	}{
		{"every stream read to its last", []segmentStream{all}, began},
		{"cut in one stream", []segmentStream{all, cutIn}, last.Add(-time.Nanosecond)},
		{"a stream not reached", []segmentStream{all, cutIn, unread}, marked},
		{"cut before the mark", []segmentStream{{Name: "d", From: 1, To: 1, Through: 9, Messages: 1, LastTime: marked.Add(-time.Second).UnixNano()}}, marked},
	} {
		seg := &segment{Began: began, Streams: tc.streams, Cut: len(tc.streams) > 1}
		if got := c.reached(seg); !got.Equal(tc.want) {
			t.Errorf("%s: reached %v, want %v", tc.name, got, tc.want)
		}
	}
}
