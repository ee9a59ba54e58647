package jsbus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Create sets key only if it holds no value, for leases.
//
// A key this adapter removed (DeleteRev) is set again in one request, over
// the delete marker it wrote: jetstream's Create takes three for a key that
// holds a delete marker (a write expecting none, a read of the marker, a
// write expecting it), and every verb takes two leases or more.
func (a *Adapter) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	var rev uint64
	tries := 0
	marker, overMarker := a.markers.take(key)
	err := a.retry(ctx, "create "+key, func(ctx context.Context) (err error) {
		tries++
		if overMarker {
			rev, err = a.kv.Update(ctx, key, value, marker)
			if !isWrongRevision(err) {
				return err
			}
			// Written since, by another keeper or by an earlier try whose
			// answer was lost (the create below then finds the key held
			// and checks whose value it is): the general way from now on.
			overMarker = false
		}
		rev, err = a.kv.Create(ctx, key, value)
		if errors.Is(err, jetstream.ErrKeyExists) && tries > 1 {
			// An earlier try whose answer was lost may have made it.
			if cur, r, gerr := a.getRev(ctx, key); gerr == nil && bytes.Equal(cur, value) {
				rev, err = r, nil
			}
		}
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return 0, fmt.Errorf("jsbus: %s already holds a value in the index %s: %w", key, a.cfg.bucket, keeper.ErrExists)
	case errors.Is(err, jetstream.ErrInvalidKey):
		return 0, fmt.Errorf("jsbus: %q is not a valid index key, so it was not stored: %w", key, keeper.ErrBadRequest)
	case err != nil:
		return 0, busErr(fmt.Errorf("jsbus: create %s in the index %s failed: %w", key, a.cfg.bucket, err))
	}
	return rev, nil
}

// GetRev returns the value of key and its revision.
func (a *Adapter) GetRev(ctx context.Context, key string) ([]byte, uint64, error) {
	var (
		value []byte
		rev   uint64
	)
	err := a.retry(ctx, "read "+key, func(ctx context.Context) (err error) {
		value, rev, err = a.getRev(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, fmt.Errorf("jsbus: %s is not in the index %s: %w", key, a.cfg.bucket, keeper.ErrNotFound)
	case err != nil:
		return nil, 0, busErr(fmt.Errorf("jsbus: read %s from the index %s: %w", key, a.cfg.bucket, err))
	}
	return value, rev, nil
}

// getRev is one try of GetRev.
func (a *Adapter) getRev(ctx context.Context, key string) ([]byte, uint64, error) {
	return a.leaderGet(ctx, key)
}

// Update sets key only if its revision is still rev.
func (a *Adapter) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	var n uint64
	tries := 0
	err := a.retry(ctx, "update "+key, func(ctx context.Context) (err error) {
		tries++
		n, err = a.kv.Update(ctx, key, value, rev)
		if isWrongRevision(err) && tries > 1 {
			// An earlier try whose answer was lost may have made it: the
			// key then holds this value at the next revision after rev.
			if cur, r, gerr := a.getRev(ctx, key); gerr == nil && r > rev && bytes.Equal(cur, value) {
				n, err = r, nil
			}
		}
		return err
	})
	if err != nil {
		if isWrongRevision(err) {
			return 0, fmt.Errorf("jsbus: %s changed since revision %d, so it was not updated: %w", key, rev, keeper.ErrRevision)
		}
		return 0, busErr(fmt.Errorf("jsbus: update %s in the index %s failed: %w", key, a.cfg.bucket, err))
	}
	return n, nil
}

// DeleteRev removes key only if its revision is still rev.
func (a *Adapter) DeleteRev(ctx context.Context, key string, rev uint64) error {
	tries := 0
	err := a.retry(ctx, "remove "+key, func(ctx context.Context) error {
		tries++
		marker, err := a.deleteMarker(ctx, key, rev)
		if err == nil {
			a.markers.put(key, marker)
		}
		if isWrongRevision(err) && tries > 1 {
			// An earlier try whose answer was lost may have removed it.
			if _, _, gerr := a.getRev(ctx, key); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				err = nil
			}
		}
		return err
	})
	switch {
	case err == nil, errors.Is(err, jetstream.ErrKeyNotFound):
		return nil
	case isWrongRevision(err):
		return fmt.Errorf("jsbus: %s changed since revision %d, so it was not removed: %w", key, rev, keeper.ErrRevision)
	default:
		return busErr(fmt.Errorf("jsbus: remove %s from the index %s failed: %w", key, a.cfg.bucket, err))
	}
}

// isWrongRevision tells the server's "wrong last sequence" answers apart
// from other failures: 10071, and 10164, which a replicated index gives
// when another write of the same key is still being agreed on (two keepers
// taking one lease at once).
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// deleteMarker is one try of removing key at revision rev, as jetstream's
// Delete with LastRevision does (a delete marker, written only if key's last
// revision is rev), returning the marker's own revision.
func (a *Adapter) deleteMarker(ctx context.Context, key string, rev uint64) (uint64, error) {
	if !validKey(key) {
		return 0, jetstream.ErrInvalidKey
	}
	m := nats.NewMsg(a.putSubject(key))
	m.Header.Set("KV-Operation", "DEL")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	ack, err := a.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// maxMarkers bounds the delete markers an adapter remembers: far more keys
// than the leases of the verbs a keeper runs at once.
const maxMarkers = 4096

// markers are the delete markers this adapter wrote over leases it
// released, by key: the revision a key holds if no one wrote it since.
type markers struct {
	mu  sync.Mutex
	rev map[string]uint64
}

// put notes that key's last revision is rev, a delete marker this adapter
// wrote. When the map is full it is emptied first: a key it forgot is
// created the general way.
func (m *markers) put(key string, rev uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev == nil || len(m.rev) >= maxMarkers {
		m.rev = map[string]uint64{}
	}
	m.rev[key] = rev
}

// take returns and forgets the marker noted for key.
func (m *markers) take(key string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rev, ok := m.rev[key]
	delete(m.rev, key)
	return rev, ok
}
