package keeper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/store"
)

// Layout in the store (design.md, Files), as object keys. A point or an
// aside is its archive and its record; the record is its commit mark,
// written last: a prefix whose record is missing holds no point or aside,
// only leftovers that sweepLeftovers removes.
const (
	pointsDir     = "points"
	asideDir      = "aside"
	archiveName   = "bus.tar"
	sealedName    = "bus.tar.age" // an encrypted archive (Sealing)
	pointFile     = "point.json"
	asideFile     = "aside.json"
	maxRecordSize = 4 << 20 // point.json / aside.json
)

// pointRel is the key prefix of a point.
func pointRel(module, local string, form int, fingerprint string) string {
	return path.Join(pointsDir, module, local, "f"+strconv.Itoa(form)+"-"+fingerprint)
}

// asideRel is the key prefix of an aside.
func asideRel(id string) string { return path.Join(asideDir, id) }

func archiveKey(rel string) string { return rel + "/" + archiveName }

// archiveKeyOf is the key of the archive the record rec describes:
// bus.tar.age when it is encrypted, bus.tar otherwise (and for a nil rec).
func archiveKeyOf(rel string, rec *Point) string {
	if rec != nil && rec.Encrypted != nil {
		return rel + "/" + sealedName
	}
	return archiveKey(rel)
}

// checkSealing refuses a record whose Sealing does not hold together (it
// is read from the store: outside input).
func checkSealing(s Sealing) error {
	switch {
	case s.Encrypted == nil && s.Archive != "" && s.Archive != archiveName:
		return fmt.Errorf("its record names the archive %.100q, not %s", s.Archive, archiveName)
	case s.Encrypted == nil:
		return nil
	case s.Archive != sealedName:
		return fmt.Errorf("its record says the archive is encrypted but names it %.100q, not %s", s.Archive, sealedName)
	case s.Encrypted.Format != "age":
		return fmt.Errorf("its record says the archive is encrypted with %.40q, which this keeper does not know (only age)", s.Encrypted.Format)
	}
	return nil
}

// sealingOf is what a record says of an archive written through w.
func (k *Keeper) sealingOf(w store.Writer) Sealing {
	if sw, ok := w.(*agecrypt.Writer); ok {
		return Sealing{Archive: sealedName, Encrypted: &Encryption{Format: "age", Recipients: k.seal.Recipients(), PlainSize: sw.PlainSize()}}
	}
	return Sealing{}
}

// recordKey is the commit mark of a point or an aside.
func recordKey(rel string) string {
	if isAsideRel(rel) {
		return rel + "/" + asideFile
	}
	return rel + "/" + pointFile
}

func isAsideRel(rel string) bool { return strings.HasPrefix(rel, asideDir+"/") }

// abs names a key prefix where a person finds it: a path under the file
// store's directory, else the store's URL and the key.
func (k *Keeper) abs(rel string) string {
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
// as recordJSON encodes it.
func (k *Keeper) putJSON(ctx context.Context, key string, v any) (store.Info, error) {
	data, err := recordJSON(v)
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
func (k *Keeper) getJSON(ctx context.Context, key string, v any) error {
	data, err := k.readSmall(ctx, key, maxRecordSize)
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
func (k *Keeper) readSmall(ctx context.Context, key string, limit int64) ([]byte, error) {
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
	if err := k.store.Delete(ctx, recordKey(rel)); err != nil {
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

// indentBelow is the size of compact JSON under which a record is written
// indented, for people to read; a bigger one (a point of many consumers'
// positions) is written compact, which takes a third less room and a third
// less time to write and read back.
const indentBelow = 64 << 10

// recordJSON is how every record object the keeper writes to the store
// (point.json, aside.json, evidence.json, the store's identity) is
// encoded: indented by two spaces when its compact JSON is under
// indentBelow bytes, else compact; with a final newline.
func recordJSON(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return shapeRecord(data)
}

// shapeRecord is recordJSON of the compact JSON data.
func shapeRecord(data []byte) ([]byte, error) {
	if len(data) < indentBelow {
		var b bytes.Buffer
		b.Grow(2 * len(data))
		if err := json.Indent(&b, data, "", "  "); err != nil {
			return nil, err
		}
		data = b.Bytes()
	}
	return append(data, '\n'), nil
}

// pointJSON is recordJSON of p whose positions were encoded already
// (positions, json.Marshal of p.Positions; nil: none): the point's
// other fields, then its positions, added last.
func pointJSON(p *Point, positions []byte) ([]byte, error) {
	if len(p.Positions) == 0 || positions == nil {
		return recordJSON(p)
	}
	c := *p
	c.Positions = nil
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	if len(data) < 2 || data[len(data)-1] != '}' {
		return nil, fmt.Errorf("a point's record encoded as %.40q", data)
	}
	sep := ","
	if len(data) == 2 {
		sep = ""
	}
	data = append(append(append(data[:len(data)-1], sep+`"positions":`...), positions...), '}')
	return shapeRecord(data)
}

// encodeAhead begins json.Marshal of the positions in the background; its
// result is given by the returned func, which waits for it.
func encodeAhead(positions []Position) func() ([]byte, error) {
	type encoded struct {
		data []byte
		err  error
	}
	done := make(chan encoded, 1)
	go func() {
		data, err := json.Marshal(positions)
		done <- encoded{data, err}
	}()
	return func() ([]byte, error) {
		e := <-done
		return e.data, e.err
	}
}
