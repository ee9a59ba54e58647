package natsstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// chunkSize is the object store's default chunk: one message each.
	chunkSize = 128 << 10
	// maxPending bounds the chunks published and not yet acknowledged, for
	// all of a Store's writers together: 2 MiB in flight.
	maxPending = 16
)

// putObject puts data as one object-store object in the object store's own
// format (ADR-20: chunks on $O.<bucket>.C.<nuid>, then the meta, a rollup
// on $O.<bucket>.M.<name>), so `nats object get` and ObjectStore.Get read
// it. It does not use ObjectStore.Put, which makes a publisher of its own
// for every put with 4,000 chunks in flight and, under a context with a
// deadline, no timeout on a chunk's acknowledgement: one acknowledgement
// lost in a leader change stalls it until the deadline, and it publishes the
// meta before the chunks are acknowledged. Here the Store's publisher keeps
// at most maxPending chunks in flight, each acknowledged within the
// timeout, and the meta follows only once every chunk is stored (its
// digest is sum, the SHA-256 of data the caller already made, or made here
// when sum is nil; metaSent,
// if not nil, is set then: from there on the object may land even if the put
// fails). A put the object store replaces (same name) has its chunks purged
// afterwards.
func (s *Store) putObject(ctx context.Context, meta jetstream.ObjectMeta, data []byte, sum *[32]byte, metaSent *bool) (*jetstream.ObjectInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	old, err := s.obs.GetInfo(rctx, meta.Name, jetstream.GetObjectInfoShowDeleted())
	cancel()
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, err
	}
	var id [16]byte
	rand.Read(id[:])
	nuid := hex.EncodeToString(id[:])
	subj := chunkSubject(s.bucket, nuid)
	var sent []jetstream.PubAckFuture
	waited := 0 // futures in sent already answered (each answers once)
	fail := func(err error) (*jetstream.ObjectInfo, error) {
		waitAcks(context.WithoutCancel(ctx), sent, &waited) // nothing may still read data after the return
		cctx, cancel := s.cleanupCtx(ctx)
		defer cancel()
		s.stream.Purge(cctx, jetstream.WithPurgeSubject(subj))
		return nil, err
	}
	for off := 0; off < len(data); off += chunkSize {
		m := nats.NewMsg(subj)
		m.Data = data[off:min(off+chunkSize, len(data))]
		// A publish the client sends again (after a 503 while the stream
		// elects a leader, the first may have been stored all the same)
		// must not store the chunk twice: the stream's duplicate window
		// drops a second message of the same id.
		m.Header.Set(jetstream.MsgIDHeader, nuid+"."+strconv.Itoa(off/chunkSize))
		f, err := s.pub.PublishMsgAsync(m, jetstream.WithStallWait(s.timeout))
		if err != nil {
			return fail(err)
		}
		sent = append(sent, f)
	}
	if err := waitAcks(ctx, sent, &waited); err != nil {
		return fail(err)
	}
	if sum == nil {
		d := sha256.Sum256(data)
		sum = &d
	}
	meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}
	info := &jetstream.ObjectInfo{ObjectMeta: meta, Bucket: s.bucket, NUID: nuid, Size: uint64(len(data)),
		Chunks: uint32(len(sent)), Digest: digestOf(*sum)}
	mm := nats.NewMsg(metaSubject(s.bucket, meta.Name))
	mm.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if mm.Data, err = json.Marshal(info); err != nil {
		return fail(err)
	}
	rctx, cancel = context.WithTimeout(ctx, s.timeout)
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
// on, counting in *waited those that answered (each future answers once);
// the first error is returned once all have answered (or timed out), or
// when ctx ends.
func waitAcks(ctx context.Context, sent []jetstream.PubAckFuture, waited *int) error {
	var first error
	for ; *waited < len(sent); *waited++ {
		select {
		case <-sent[*waited].Ok():
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
