package keeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/store"
)

// abs names a key prefix where a person finds it: a path under the file
// store's directory, else the store's URL and the key.
func (k *storeView) abs(rel string) string {
	d := k.store.Describe()
	if dir := fileDir(d); dir != "" {
		return path.Join(dir, rel)
	}
	return strings.TrimSuffix(d.URL, "/") + "/" + rel
}

// fileDir is the file store's directory, or "" for another store. The file
// store says its URL as file:// and the directory as it is, not escaped, so
// it is cut from there rather than parsed: a directory may hold ?, # or %.
func fileDir(d store.Description) string {
	if d.Kind != "file" {
		return ""
	}
	dir, _ := strings.CutPrefix(d.URL, "file://")
	return dir
}

// putJSON writes a small record as one object, visible whole or not at all,
// as layout.RecordJSON encodes it.
func (k *Keeper) putJSON(ctx context.Context, key string, v any) (store.Info, error) {
	data, err := layout.RecordJSON(v)
	if err != nil {
		return store.Info{}, err
	}
	return k.putRecord(ctx, key, data)
}

// putRecord writes a record's encoding (recordJSON, pointJSON) as the
// object key, refusing one a keeper would not read back.
func (k *Keeper) putRecord(ctx context.Context, key string, data []byte) (store.Info, error) {
	if err := checkRecordSize(key, data); err != nil {
		return store.Info{}, err
	}
	return k.putBytes(ctx, key, data)
}

// putBytes writes a small object, visible whole or not at all.
func (k *Keeper) putBytes(ctx context.Context, key string, data []byte) (store.Info, error) {
	w, err := k.store.Create(ctx, key)
	if err != nil {
		return store.Info{}, err
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		return store.Info{}, err
	}
	return w.Commit(ctx)
}

// getJSON reads a small record strictly. Its error wraps store.ErrNotFound
// when there is none.
func (k *storeView) getJSON(ctx context.Context, key string, v any) error {
	data, err := k.readSmall(ctx, key, layout.MaxRecordSize)
	if err != nil {
		return err
	}
	if err := decodeRecord(key, data, v); err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return err
		}
		return fmt.Errorf("%s is not valid JSON: %w", key, err)
	}
	return nil
}

// readSmall reads one small object whole, refusing one over limit bytes.
// Its error wraps store.ErrNotFound when there is none.
func (k *storeView) readSmall(ctx context.Context, key string, limit int64) ([]byte, error) {
	o, err := k.store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	if o.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over %d", key, o.Size(), limit)
	}
	rd, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rd, limit+1)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	return buf.Bytes(), nil
}

// removePrefix deletes every object under rel: its record first, so that
// what it was stops existing at once, then the rest.
func (k *Keeper) removePrefix(ctx context.Context, rel string) error {
	if err := k.store.Delete(ctx, layout.RecordKey(rel)); err != nil {
		return err
	}
	objs, err := k.store.List(ctx, rel+"/")
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		if err := k.store.Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// exists reports whether key holds a committed object.
func (k *Keeper) exists(ctx context.Context, key string) (bool, error) {
	_, err := k.store.Stat(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
