package keeper

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
)

// segment is a segment's record (segment.json): its commit mark, written
// after its archive, never rewritten.
type segment struct {
	Chain  string    `json:"chain"`  // the chain's prefix in the store
	Base   string    `json:"base"`   // the base point's prefix
	N      uint64    `json:"n"`      // its number in the chain, from 1
	Closed time.Time `json:"closed"` // when it was closed: what it records was true then
	// Began is when its round read the streams' last sequences: every
	// message stored before it is in this segment or an earlier one, unless
	// Cut says the segment was cut at its bytes.
	Began time.Time `json:"began"`
	Cut   bool      `json:"cut,omitempty"`
	// Reached is how far the segment takes the window: every message
	// stored at or before it is in this segment or an earlier one. It is
	// Began, or for a segment cut at its bytes the time just before the
	// first message it left to the next (a stream's times grow with its
	// sequences). Zero in segments of keepers before it.
	Reached time.Time `json:"reached,omitempty"`
	// Streams are each stream of the kept data as the segment saw it.
	Streams []segmentStream `json:"streams"`
	// Positions are the consumers of the kept data's streams and the
	// module's on other streams, sampled at PositionsAt.
	Positions   []Position `json:"positions"`
	PositionsAt time.Time  `json:"positions-at"`
	// Archive is how its archive is stored; none when no stream gained
	// a message.
	HasArchive  bool   `json:"has-archive,omitempty"`
	ArchiveSize int64  `json:"archive-size,omitempty"`
	ArchiveSum  string `json:"archive-sum,omitempty"`
	kept.Sealing
	WrittenBy string `json:"written-by,omitempty"`
}

// segmentStream is one stream in a segment.
type segmentStream struct {
	Name string `json:"name"`
	// From and To are the sequences the segment covers: every message of
	// the stream in From..To it holds (To below From: none), those that
	// were deleted before it was read excepted.
	From     uint64 `json:"from"`
	To       uint64 `json:"to"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// FirstTime and LastTime are its messages' times (Unix ns).
	FirstTime int64 `json:"first-time,omitempty"`
	LastTime  int64 `json:"last-time,omitempty"`
	// StreamFirst is the stream's first sequence when the segment was
	// closed: what limits removed from its head was gone by then.
	StreamFirst uint64 `json:"stream-first"`
	// Deleted are the sequences up to To seen deleted since the segment
	// before (ranges, inclusive, in order), the stream's head excepted.
	Deleted [][2]uint64 `json:"deleted,omitempty"`
	// Untracked says the capture no longer tracks the stream's deletes
	// (it held more deleted sequences than maxTrackedDeletes): from this
	// segment on, Deleted lists none.
	Untracked bool `json:"deletes-untracked,omitempty"`
	// Made is when the stream was made (Unix ns): one made again does
	// not continue the chain.
	Made int64 `json:"made"`
	// Through is the stream's last sequence when the round began; To is
	// below it when the segment was cut at its bytes.
	Through uint64 `json:"through"`
	// Unseen is how many sequences of From..To were stored and deleted
	// before the segment read them (a KV key updated faster than the
	// segments): no moment holds what they held.
	Unseen uint64 `json:"unseen,omitempty"`
}

// chain is one base and its committed segments, in order.
type chain struct {
	rel       string // capture/<module>/<local>/f<form>-<fingerprint>
	base      string // the base point's prefix
	form      int
	baseFP    string
	baseTaken time.Time
	segments  []*segment
	// listed are its committed segments as the store lists them, in
	// order, and listedBytes their archives' bytes (listChains).
	listed      []listedSegment
	listedBytes int64
}

// segmentOf returns the segment of stream name in s, or nil.
func (s *segment) stream(name string) *segmentStream {
	for i := range s.Streams {
		if s.Streams[i].Name == name {
			return &s.Streams[i]
		}
	}
	return nil
}

// chains lists the chains of module/local in the store, oldest base first,
// with their committed segments read (a segment without its record is no
// segment). A chain stops at its first missing number: what a keeper wrote
// after a gap is not part of it.
func (k *storeView) chains(ctx context.Context, module, local string) ([]*chain, error) {
	return k.chainsRead(ctx, module, local, k.readChain)
}

// chainsRead lists the chains of module/local (listChains) and reads into
// each the records read asks for (readChain: all, readReach: the newest).
func (k *storeView) chainsRead(ctx context.Context, module, local string, read func(context.Context, *chain) error) ([]*chain, error) {
	chains, err := k.listChains(ctx, module, local)
	if err != nil {
		return nil, err
	}
	for _, c := range chains {
		if err := read(ctx, c); err != nil {
			return nil, err
		}
	}
	return chains, nil
}

// readChain reads the records of every segment of listed chain c into
// c.segments, but for those read already (c.segments is always the tail
// of c.listed).
func (k *storeView) readChain(ctx context.Context, c *chain) error {
	head := len(c.listed) - len(c.segments)
	segs := make([]*segment, 0, len(c.listed))
	for _, ls := range c.listed[:head] {
		seg, err := k.readSegment(ctx, c, ls)
		if err != nil {
			return err
		}
		segs = append(segs, seg)
	}
	c.segments = append(segs, c.segments...)
	return nil
}

// listedSegment is a committed segment as the store lists it: its
// record's key and the bytes of the rest of its directory (its archive).
type listedSegment struct {
	key     string
	archive int64
}

// listChains lists the chains of module/local in the store as chains does,
// oldest base first, from the store's listing alone: each chain's
// committed segments are listed (c.listed, c.listedBytes), not read. What
// needs only counts and bytes (list-kept) reads no segment record, however
// long the window.
func (k *storeView) listChains(ctx context.Context, module, local string) ([]*chain, error) {
	objs, err := k.store.List(ctx, path.Join(captureDir, module, local)+"/")
	if err != nil {
		return nil, fmt.Errorf("listing the capture of %s/%s: %w", module, local, err)
	}
	byRel := map[string]*chain{}
	dirs := map[string]map[uint64]*listedSegment{}
	recorded := map[string]bool{} // a chain is one once a record of it is stored
	var order []*chain
	for _, o := range objs {
		parts := strings.Split(o.Key, "/")
		if len(parts) != 6 {
			continue
		}
		form, fp, ok := parseChainName(parts[3])
		if !ok {
			continue
		}
		n, err := segmentNumber(parts[4])
		if err != nil {
			if parts[5] == segmentFile {
				return nil, fmt.Errorf("reading the capture segment %s: %w", k.abs(o.Key), err)
			}
			continue
		}
		rel := path.Join(parts[:4]...)
		if byRel[rel] == nil {
			byRel[rel], dirs[rel] = &chain{rel: rel, base: pointRel(module, local, form, fp), form: form, baseFP: fp}, map[uint64]*listedSegment{}
			order = append(order, byRel[rel])
		}
		ls := dirs[rel][n]
		if ls == nil {
			ls = &listedSegment{}
			dirs[rel][n] = ls
		}
		if parts[5] == segmentFile {
			ls.key, recorded[rel] = o.Key, true
		} else {
			ls.archive += o.Size
		}
	}
	out := order[:0]
	for _, c := range order {
		for n := uint64(1); dirs[c.rel][n] != nil && dirs[c.rel][n].key != ""; n++ {
			c.listed = append(c.listed, *dirs[c.rel][n])
			c.listedBytes += dirs[c.rel][n].archive
		}
		if !recorded[c.rel] {
			continue // archives without a record: no segment committed
		}
		rec, err := k.baseRecord(ctx, module, local, c.form, c.baseFP)
		if err != nil {
			continue // its base is gone: the chain restores nothing
		}
		var p Point
		if err := decodeRecord("the base point "+c.base, rec, &p); err != nil {
			continue
		}
		c.baseTaken = p.Taken
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *chain) int { return a.baseTaken.Compare(b.baseTaken) })
	return out, nil
}

// readReach reads the records of listed chain c from its newest back to
// the one chainReach stops at (the newest, but for segments of keepers
// before Reached was recorded), into c.segments, in order.
func (k *storeView) readReach(ctx context.Context, c *chain) error {
	var tail []*segment
	for i := len(c.listed) - 1; i >= 0; i-- {
		seg, err := k.readSegment(ctx, c, c.listed[i])
		if err != nil {
			return err
		}
		tail = append(tail, seg)
		if !seg.Reached.IsZero() || !seg.Cut {
			break
		}
	}
	slices.Reverse(tail)
	c.segments = tail
	return nil
}

// segmentOf is c's i-th committed segment (from 0): the one chains or
// readReach read, else read now.
func (k *storeView) segmentOf(ctx context.Context, c *chain, i int) (*segment, error) {
	if off := len(c.listed) - len(c.segments); i >= off {
		return c.segments[i-off], nil
	}
	return k.readSegment(ctx, c, c.listed[i])
}

// readSegment reads and checks the record of c's listed segment ls.
func (k *storeView) readSegment(ctx context.Context, c *chain, ls listedSegment) (*segment, error) {
	data, err := k.readSmall(ctx, ls.key, layout.MaxRecordSize)
	var seg *segment
	if err == nil {
		seg, err = decodeSegment(data, c.rel, path.Base(path.Dir(ls.key)))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the capture segment %s: %w", k.abs(ls.key), err)
	}
	return seg, nil
}

// parseChainName reads f<form>-<fingerprint>.
func parseChainName(s string) (int, string, bool) {
	rest, ok := strings.CutPrefix(s, "f")
	if !ok {
		return 0, "", false
	}
	num, fp, ok := strings.Cut(rest, "-")
	form, err := strconv.Atoi(num)
	if !ok || err != nil || !strings.HasPrefix(fp, baseFingerprintPrefix) {
		return 0, "", false
	}
	return form, fp, true
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
