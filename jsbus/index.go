package jsbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// keySubject is the subject that holds key in the index bucket (with key
// empty, the prefix of every key's subject).
func (a *Adapter) keySubject(key string) string { return "$KV." + a.cfg.bucket + "." + key }

// Get returns the value of key in the index, or an error wrapping
// keeper.ErrNotFound when the key is missing or deleted.
func (a *Adapter) Get(ctx context.Context, key string) ([]byte, error) {
	var value []byte
	err := a.retry(ctx, "read "+key, func(ctx context.Context) (err error) {
		value, _, err = a.leaderGet(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, fmt.Errorf("jsbus: %s is not in the index %s: %w", key, a.cfg.bucket, keeper.ErrNotFound)
	case errors.Is(err, jetstream.ErrInvalidKey):
		return nil, fmt.Errorf("jsbus: %q is not a valid index key: %w", key, keeper.ErrBadRequest)
	case err != nil:
		return nil, busErr(fmt.Errorf("jsbus: read %s from the index %s: %w", key, a.cfg.bucket, err))
	}
	return value, nil
}

// Put sets key to value in the index.
func (a *Adapter) Put(ctx context.Context, key string, value []byte) error {
	if len(value) > indexMaxValue {
		return fmt.Errorf("jsbus: the value of %s is %d bytes, over the index's %d, so it was not stored: %w",
			key, len(value), indexMaxValue, keeper.ErrBadRequest)
	}
	err := a.retry(ctx, "store "+key, func(ctx context.Context) error {
		_, err := a.kv.Put(ctx, key, value)
		return err
	})
	if errors.Is(err, jetstream.ErrInvalidKey) {
		return fmt.Errorf("jsbus: %q is not a valid index key, so it was not stored: %w", key, keeper.ErrBadRequest)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: store %s in the index %s failed: %w", key, a.cfg.bucket, err))
	}
	return nil
}

// Delete removes key from the index; a missing key is not an error.
func (a *Adapter) Delete(ctx context.Context, key string) error {
	err := a.retry(ctx, "remove "+key, func(ctx context.Context) error { return a.kv.Delete(ctx, key) })
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if errors.Is(err, jetstream.ErrInvalidKey) {
		return fmt.Errorf("jsbus: %q is not a valid index key, so nothing was removed: %w", key, keeper.ErrBadRequest)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: remove %s from the index %s failed: %w", key, a.cfg.bucket, err))
	}
	return nil
}

// Keys lists the live keys of the index that begin with prefix, sorted. An
// empty index, or no key with that prefix, gives an empty list.
func (a *Adapter) Keys(ctx context.Context, prefix string) ([]string, error) {
	return a.KeysUnder(ctx, []string{prefix})
}

// maxKeyFilters bounds the filters of one key list; a list of more
// prefixes reads every key and keeps those that match.
const maxKeyFilters = 256

// KeysUnder lists the live keys of the index that begin with any of
// prefixes, sorted, with one watch of the index: a few prefixes ending in
// "." read only the keys under them. No prefixes give an empty list.
func (a *Adapter) KeysUnder(ctx context.Context, prefixes []string) ([]string, error) {
	if len(prefixes) == 0 {
		return []string{}, nil
	}
	var keys []string
	err := a.retry(ctx, "list the keys of the index", func(ctx context.Context) (err error) {
		keys, err = a.keysOnce(ctx, prefixes)
		return err
	})
	return keys, err
}

// keysOnce is one try of KeysUnder.
func (a *Adapter) keysOnce(ctx context.Context, prefixes []string) ([]string, error) {
	filters := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		if !strings.HasSuffix(p, ".") || !validKeyPrefix(p) || len(prefixes) > maxKeyFilters {
			filters = []string{">"}
			break
		}
		filters = append(filters, p+">")
	}
	slices.Sort(filters)
	filters = slices.Compact(filters)
	w, err := a.kv.WatchFiltered(ctx, filters, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: list the keys of the index %s: %w", a.cfg.bucket, err))
	}
	defer w.Stop()
	var keys []string
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("jsbus: list the keys of the index %s: %w", a.cfg.bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("jsbus: the key list of the index %s ended early: %w (%w)", a.cfg.bucket, keeper.ErrNoBus, nats.ErrTimeout)
			}
			if e == nil { // all current keys seen
				slices.Sort(keys)
				return slices.Compact(keys), nil
			}
			if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Key(), p) }) {
				keys = append(keys, e.Key())
			}
			if len(keys) > maxKeys {
				return nil, fmt.Errorf("jsbus: the index %s holds more than %d keys under %q", a.cfg.bucket, maxKeys, prefixes)
			}
		}
	}
}

// validKeyPrefix reports whether "<prefix>>" is a valid KV filter.
func validKeyPrefix(prefix string) bool {
	for _, t := range strings.Split(strings.TrimSuffix(prefix, "."), ".") {
		if t == "" || strings.ContainsAny(t, " *>\t\r\n\x00") {
			return false
		}
	}
	return true
}
