package busarchive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
)

// A stream archive decoded whole, as Verify checks it: read through once,
// decoded item by item, then held to the manifest's entry of the stream.
// A StreamCheck decodes the archive being written the same way.

// decodedStream is what decoding one stream archive found, before it is
// held to the manifest's entry of the stream (heldTo).
type decodedStream struct {
	entry    string
	rep      StreamReport
	state    *snapState // its state.json, once decoded
	stored   [2]uint64  // the messages' bytes as the server counts them, on file and in memory (for a stream cut)
	problems []error
	held     bool // to be held to the manifest: decoding neither stopped nor met an entry over its bound
}

// decodeStream reads the stream archive of stream through r to its end
// sentinel (see snapDecoder), counting what it holds. A state.json or
// consumer entry over its bound is the one problem then reported: the
// snapshot is not decoded further and nothing of it is counted. When
// reading stops (ctx ends, or stopped says so), what was decoded is not
// held to the manifest: the caller reports the stop.
func decodeStream(ctx context.Context, stream string, r io.Reader, stopped func() bool) *decodedStream {
	d := &decodedStream{entry: DataEntry(stream), rep: StreamReport{Name: stream}}
	bad := func(kind error, format string, args ...any) error {
		return &EntryError{Entry: d.entry, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	}
	dec := newSnapDecoder(r)
	for !d.rep.Complete {
		item, err := dec.next()
		if err != nil {
			if ctx.Err() != nil || stopped() {
				return d
			}
			if big := (*entryTooLarge)(nil); errors.As(err, &big) {
				d.rep = StreamReport{Name: stream}
				d.problems = []error{bad(ErrTooLarge, "%v, so it was not decoded", err)}
				return d
			}
			d.problems = append(d.problems, bad(ErrFormat, "the snapshot does not decode: %v", err))
			break
		}
		if item == itemState {
			st := dec.state // a copy: the decoder and its buffers go once the stream is decoded
			d.state = &st
		}
		dec.tally(item, &d.rep)
		if item == itemMessage {
			sub, hdr, data := len(dec.hdr.Name), int(dec.hdr.HeaderSize), int(dec.hdr.PayloadSize)
			d.stored[0] += StoredSize(false, sub, hdr, data)
			d.stored[1] += StoredSize(true, sub, hdr, data)
		}
	}
	d.held = true
	return d
}

// heldTo is the problems of what was decoded: those of decoding, and
// those of comparing it with sm, the manifest's entry of the stream.
func (d *decodedStream) heldTo(sm *StreamManifest) []error {
	problems := slices.Clone(d.problems)
	if !d.held || d.state == nil {
		return problems
	}
	stored := d.stored[0]
	if sm.Cut != nil && StoredInMemory(sm.Config.Raw) {
		stored = d.stored[1]
	}
	problems = append(problems, compareState(d.entry, sm.State, d.state, &d.rep)...)
	return append(problems, compareCut(d.entry, sm, &d.rep, stored)...)
}

// tally counts one decoded item into rep: a consumer, a message (and the
// first and last sequence), the end sentinel (rep is then complete).
func (d *snapDecoder) tally(item snapItem, rep *StreamReport) {
	switch item {
	case itemConsumer:
		rep.Consumers++
	case itemMessage:
		rep.Messages++
		if rep.FirstSeq == 0 {
			rep.FirstSeq = d.seq
		}
		rep.LastSeq = d.seq
	case itemEnd:
		rep.Complete = true
	}
}
