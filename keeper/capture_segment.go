package keeper

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// maxSegmentStreams bounds the streams a segment record may name: a kept
// data is a handful of streams.
const maxSegmentStreams = 1024

// decodeSegment reads the record of segment dir (s<n>, twelve digits) of
// the chain at rel, refusing one that is not that segment's or whose
// ranges cannot be: each stream's range runs up to at most what the
// stream held when the round began, holds no more messages than
// sequences, and its deletes lie up to its end in ordered ranges; it reached
// no later than its round began, and closed after.
func decodeSegment(data []byte, rel, dir string) (*segment, error) {
	n, err := segmentNumber(dir)
	if err != nil {
		return nil, err
	}
	var seg segment
	if err := json.Unmarshal(data, &seg); err != nil {
		return nil, err
	}
	switch {
	case seg.N != n || seg.Chain != rel:
		return nil, fmt.Errorf("the record says it is segment %d of %s, not %d of %s", seg.N, seg.Chain, n, rel)
	case len(seg.Streams) == 0 || len(seg.Streams) > maxSegmentStreams:
		return nil, fmt.Errorf("the record names %d streams (1 to %d)", len(seg.Streams), maxSegmentStreams)
	case seg.Closed.Before(seg.Began) || seg.Reached.After(seg.Began):
		return nil, fmt.Errorf("its round began %v, reached %v and closed %v, out of order", seg.Began, seg.Reached, seg.Closed)
	case seg.ArchiveSize < 0:
		return nil, fmt.Errorf("its archive is %d bytes", seg.ArchiveSize)
	}
	for i := range seg.Streams {
		if err := checkSegmentStream(&seg.Streams[i]); err != nil {
			return nil, fmt.Errorf("stream %q: %w", seg.Streams[i].Name, err)
		}
	}
	return &seg, nil
}

// checkSegmentStream checks one stream's part of a segment record.
func checkSegmentStream(ss *segmentStream) error {
	if err := ValidName("stream", ss.Name); err != nil {
		return err
	}
	switch {
	case ss.From == 0 || ss.To+1 < ss.From || ss.To > ss.Through:
		return fmt.Errorf("its range %d..%d does not fit the stream's last sequence %d", ss.From, ss.To, ss.Through)
	case ss.To >= ss.From && ss.Messages+ss.Unseen > ss.To-ss.From+1:
		return fmt.Errorf("%d messages and %d unseen in %d sequences", ss.Messages, ss.Unseen, ss.To-ss.From+1)
	case ss.To < ss.From && (ss.Messages != 0 || ss.Unseen != 0):
		return fmt.Errorf("%d messages in an empty range", ss.Messages)
	}
	var after uint64
	for _, d := range ss.Deleted {
		if d[0] == 0 || d[0] > d[1] || d[1] > ss.To || (after > 0 && d[0] <= after) {
			return fmt.Errorf("the deleted range %d..%d is not up to its range's end %d, in order", d[0], d[1], ss.To)
		}
		after = d[1]
	}
	return nil
}

// segmentNumber reads a segment's directory name: s and twelve digits.
func segmentNumber(dir string) (uint64, error) {
	digits, ok := strings.CutPrefix(dir, "s")
	n, err := strconv.ParseUint(digits, 10, 64)
	if !ok || len(digits) != 12 || err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not the directory of a segment (s and twelve digits)", dir)
	}
	return n, nil
}
