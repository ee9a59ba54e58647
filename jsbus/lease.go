package jsbus

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Create sets key only if it holds no value, for leases.
func (a *Adapter) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	var rev uint64
	tries := 0
	err := a.retry(ctx, "create "+key, func(ctx context.Context) (err error) {
		tries++
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
		err := a.kv.Delete(ctx, key, jetstream.LastRevision(rev))
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

// isWrongRevision tells the server's "wrong last sequence" answer (10071)
// apart from other failures.
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}
