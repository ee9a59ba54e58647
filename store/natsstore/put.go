package natsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

const (
	// maxChunk is the largest chunk (one message each) this store
	// publishes: 512 KiB, four times the object store's default, so a part
	// is 16 messages and 16 acknowledgements, not 64; the chunk shrinks to
	// fit a server whose max payload is smaller (chunkFor). Readers take
	// the chunk size from the object's meta.
	maxChunk = 512 << 10
	// window bounds the bytes of chunks published and not yet
	// acknowledged, for all of a Store's writers together: one part, so a
	// part's chunks all go out before the first acknowledgement is waited
	// for. They are slices of the part being put, which the part writer
	// holds anyway, so the window costs no memory of its own.
	window = store.PartSize
)

// chunkFor is the chunk for a server whose max payload is maxPayload: at
// most maxChunk, and 4 KiB under the max payload, which leaves room for a
// chunk's headers (its Nats-Msg-Id).
func chunkFor(maxPayload int64) int {
	c := min(int64(maxChunk), maxPayload-4<<10)
	return int(max(c, 1<<10))
}

// putObject puts data as one object-store object in the object store's own
// format (ADR-20: chunks on $O.<bucket>.C.<nuid>, then the meta, a rollup
// on $O.<bucket>.M.<name>), so `nats object get` and ObjectStore.Get read
// it. It does not use ObjectStore.Put, which makes a publisher of its own
// for every put with 4,000 chunks in flight and, under a context with a
// deadline, no timeout on a chunk's acknowledgement: one acknowledgement
// lost in a leader change stalls it until the deadline, and it publishes the
// meta before the chunks are acknowledged. Here the Store's publisher keeps
// at most window bytes of chunks in flight, each acknowledged within the
// timeout, and the meta follows only once every chunk is stored (its
// digest is sum, the SHA-256 of data the caller already made, or made here
// when sum is nil; metaSent,
// if not nil, is set then: from there on the object may land even if the put
// fails). A put the object store replaces (same name) has its chunks purged
// afterwards; fresh says the name was never put before (a part's first put:
// its upload's name is new), so there is nothing to look up and replace.
func (s *Store) putObject(ctx context.Context, meta jetstream.ObjectMeta, data store.Blocks, sum *[32]byte, metaSent *bool, fresh bool) (*jetstream.ObjectInfo, error) {
	var old *jetstream.ObjectInfo
	if !fresh {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		var err error
		old, err = s.obs.GetInfo(rctx, meta.Name, jetstream.GetObjectInfoShowDeleted())
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, err
		}
	}
	var id [16]byte
	rand.Read(id[:])
	nuid := hex.EncodeToString(id[:])
	subj := chunkSubject(s.bucket, nuid)
	chunk, size := s.chunk, data.Len()
	sent := make([]jetstream.PubAckFuture, 0, (size+chunk-1)/chunk+len(data))
	waited := 0 // futures in sent already answered (each answers once)
	seqs := make([]uint64, cap(sent))
	fail := func(err error) (*jetstream.ObjectInfo, error) {
		waitAcks(context.WithoutCancel(ctx), sent, &waited, seqs) // nothing may still read data after the return
		cctx, cancel := s.cleanupCtx(ctx)
		defer cancel()
		s.stream.Purge(cctx, jetstream.WithPurgeSubject(subj))
		return nil, err
	}
	// Chunks are cut at the blocks' ends too (a chunk is never two
	// blocks' bytes in one message, so nothing is copied here).
	for _, blk := range data {
		for off := 0; off < len(blk); off += chunk {
			m := nats.NewMsg(subj)
			m.Data = blk[off:min(off+chunk, len(blk))]
			// A publish the client sends again (after a 503 while the
			// stream elects a leader, the first may have been stored all
			// the same) must not store the chunk twice: the stream's
			// duplicate window drops a second message of the same id.
			m.Header.Set(jetstream.MsgIDHeader, nuid+"."+strconv.Itoa(len(sent)))
			f, err := s.pub.PublishMsgAsync(m, jetstream.WithStallWait(s.timeout))
			if err != nil {
				return fail(err)
			}
			sent = append(sent, f)
		}
	}
	if err := waitAcks(ctx, sent, &waited, seqs); err != nil {
		return fail(err)
	}
	if err := inOrder(seqs[:len(sent)]); err != nil {
		return fail(err)
	}
	if sum == nil {
		d := data.Sum()
		sum = &d
	}
	meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: uint32(chunk)}
	info := &jetstream.ObjectInfo{ObjectMeta: meta, Bucket: s.bucket, NUID: nuid, Size: uint64(size),
		Chunks: uint32(len(sent)), Digest: digestOf(*sum)}
	mm := nats.NewMsg(metaSubject(s.bucket, meta.Name))
	mm.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	var err error
	if mm.Data, err = json.Marshal(info); err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if metaSent != nil {
		*metaSent = true
	}
	if _, err := s.js.PublishMsg(rctx, mm); err != nil {
		return fail(err) // a meta that lands anyway names purged chunks; the next put or Sweep replaces it
	}
	if old != nil && old.NUID != "" && old.NUID != nuid {
		if err := s.stream.Purge(rctx, jetstream.WithPurgeSubject(chunkSubject(s.bucket, old.NUID))); err != nil {
			s.log.Warn("could not purge the chunks of a replaced object; Sweep will", "name", meta.Name, "err", err)
		}
	}
	return info, nil
}

// waitAcks waits for the acknowledgement of every chunk from sent[*waited]
// on, counting in *waited those that answered (each future answers once)
// and recording each one's stream sequence in seqs (as long as sent); the
// first error is returned once all have answered (or timed out), or when
// ctx ends.
func waitAcks(ctx context.Context, sent []jetstream.PubAckFuture, waited *int, seqs []uint64) error {
	var first error
	for ; *waited < len(sent); *waited++ {
		select {
		case ack := <-sent[*waited].Ok():
			seqs[*waited] = ack.Sequence
		case err := <-sent[*waited].Err():
			if first == nil {
				first = fmt.Errorf("chunk %d of %d was not stored: %w", *waited+1, len(sent), err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// errOutOfOrder: a put's chunks were stored in another order than they were
// published. The client publishes a chunk again on its own when the stream
// answers 503 (no leader yet), and by then the chunks after it may have been
// stored; the object store reads chunks in stream order, so such a put is
// purged and put again.
var errOutOfOrder = errors.New("the chunks were stored out of order (one was published again while the stream elected a leader)")

// inOrder checks that the chunks' stream sequences rise in the order the
// chunks were published.
func inOrder(seqs []uint64) error {
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			return fmt.Errorf("chunk %d has sequence %d, chunk %d %d: %w", i, seqs[i-1], i+1, seqs[i], errOutOfOrder)
		}
	}
	return nil
}
