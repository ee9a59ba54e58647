package natsstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

// sink stores one upload's parts and commits its head (store.PartSink).
type sink struct {
	s      *Store
	key    string
	upload string

	mu        sync.Mutex
	sums      map[int][32]byte // parts stored
	tried     map[int]bool     // parts whose put began, stored or not
	committed bool
	headTried bool // a head's meta was sent: it may land late, so Abort leaves the parts to Sweep
}

func (s *Store) newSink(key string) *sink {
	return &sink{s: s, key: key, upload: newUploadID(), sums: map[int][32]byte{}, tried: map[int]bool{}}
}

// Part puts part n as its own object. A retried put writes the same name and
// bytes again, so it is safe to repeat; the object store replaces the first.
func (k *sink) Part(ctx context.Context, n int, data store.Blocks, sum [32]byte) error {
	name := partName(k.upload, n)
	k.mu.Lock()
	fresh := !k.tried[n] // a part kept for a hold (KeepPart) is put again: that put replaces the first
	k.tried[n] = true
	k.mu.Unlock()
	meta := jetstream.ObjectMeta{
		Name:     name,
		Headers:  nats.Header{partHeader: []string{strconv.Itoa(n)}},
		Metadata: map[string]string{mdKey: k.key, mdUpload: k.upload},
	}
	err := k.s.retryWithin(ctx, "put "+name, k.s.partTimeout(), func(ctx context.Context) error {
		_, err := k.s.putObject(ctx, meta, data, &sum, nil, fresh)
		fresh = false // a put tried again may have left its meta
		return err
	})
	if err != nil {
		return fmt.Errorf("could not put part %d of %s into bucket %s as %s: %w", n, k.key, k.s.bucket, name, busErr(err))
	}
	k.mu.Lock()
	k.sums[n] = sum
	k.mu.Unlock()
	return nil
}

var _ store.PartReader = (*sink)(nil)

// KeepPart puts a part a hold overlaps as any part: a part object can be
// read back, and the Part that follows with its final bytes replaces it.
func (k *sink) KeepPart(ctx context.Context, n int, data store.Blocks, sum [32]byte) error {
	return k.Part(ctx, n, data, sum)
}

// ReadPart reads part n back as it was stored, for the part writer to patch
// a held header into it and put it again (so no part waits in memory for
// the end of a hold). The object store's client checks the part's digest,
// which must be the SHA-256 Part was given.
func (k *sink) ReadPart(ctx context.Context, n int, into store.Blocks) error {
	name := partName(k.upload, n)
	k.mu.Lock()
	sum, ok := k.sums[n]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("part %d of %s was never stored, so it cannot be read back", n, k.key)
	}
	err := k.s.retryWithin(ctx, "read back "+name, k.s.partTimeout(), func(ctx context.Context) error {
		r, err := k.s.obs.Get(ctx, name)
		if err != nil {
			return err
		}
		defer r.Close()
		info, err := r.Info()
		if err == nil && (int64(info.Size) != int64(into.Len()) || info.Digest != digestOf(sum)) {
			return fmt.Errorf("it holds %d bytes with digest %s, not the %d bytes with SHA-256 %x that were put", info.Size, info.Digest, into.Len(), sum)
		}
		if err != nil {
			return err
		}
		if err := into.Fill(r); err != nil {
			return err
		}
		var one [1]byte
		if m, err := r.Read(one[:]); m > 0 || err != io.EOF {
			return fmt.Errorf("it does not end where it should, or its digest does not match (%v)", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("could not read part %d of %s back from bucket %s as %s: %w", n, k.key, k.s.bucket, name, busErr(err))
	}
	return nil
}

// Complete writes the head under the key, replacing the one there, and then
// removes the old head's parts.
func (k *sink) Complete(ctx context.Context, count int, size int64, sum string) (store.Info, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := head{Version: 1, Upload: k.upload, Size: size, Sum: sum, PartSize: store.PartSize, Parts: []string{}}
	sums := make([][32]byte, 0, count)
	for n := 1; n <= count; n++ {
		p, ok := k.sums[n]
		if !ok {
			return store.Info{}, fmt.Errorf("part %d of %s was never stored, so its head was not written", n, k.key)
		}
		sums = append(sums, p)
		h.Parts = append(h.Parts, hex.EncodeToString(p[:]))
	}
	if len(k.sums) != count || count != partCount(size) || store.CombineSums(sums) != sum {
		return store.Info{}, fmt.Errorf("%s has %d parts stored, %d given for %d bytes, and sum %s given, which do not agree, so its head was not written",
			k.key, len(k.sums), count, size, sum)
	}
	body, err := json.Marshal(h)
	if err != nil {
		return store.Info{}, err
	}
	meta := jetstream.ObjectMeta{
		Name:    k.key,
		Headers: nats.Header{headHeader: []string{headVersion}},
		Metadata: map[string]string{mdSize: strconv.FormatInt(size, 10), mdSum: sum, mdUpload: k.upload,
			mdParts: strconv.Itoa(count)},
	}
	old, err := k.s.putHead(ctx, meta, body, k.upload, &k.headTried)
	if err != nil {
		return store.Info{}, err
	}
	k.committed = true
	info, err := k.s.Stat(ctx, k.key)
	if err != nil {
		k.s.log.Warn("the head was put but could not be read back", "key", k.key, "err", err)
		info = store.Info{Key: k.key, Size: size, Sum: sum, Modified: time.Now().UTC()}
	}
	if old != nil && isHead(old) && old.Metadata[mdUpload] != k.upload {
		k.s.releaseParts(ctx, k.key, old)
	}
	return info, nil
}

// Abort removes the parts put so far; Sweep removes what it cannot.
func (k *sink) Abort(ctx context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.committed {
		return
	}
	if k.headTried {
		k.s.log.Warn("the head of an aborted upload may still land, so its parts are left for Sweep", "key", k.key, "upload", k.upload)
		return
	}
	ctx, cancel := k.s.cleanupCtx(ctx)
	defer cancel()
	for n := range k.tried {
		if err := k.s.remove(ctx, partName(k.upload, n)); err != nil {
			k.s.log.Warn("could not remove a part of an aborted upload; Sweep will", "key", k.key, "part", n, "err", err)
		}
	}
}

// Create begins a new object at key: its parts are put as they fill (one at
// a time, with ctx), its head when Commit is called.
func (s *Store) Create(ctx context.Context, key string) (store.Writer, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	return store.NewPartWriter(ctx, key, s.newSink(key)), nil
}
