package archives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// KeyIndex reads the key index that the archive's record names for stream
// (kept.StreamSum.KeyIndex): its object checked against the record (name,
// size, checksum), decrypted as the archive is, decoded (its own SHA-256
// and every entry's sum checked), and checked to be the index of this
// archive's data entry of stream (its size). It returns nil, nil when the
// record names none. Its error is a *kept.DamagedError naming the index
// (kept.ErrLocked for an encrypted one this keeper cannot decrypt); the
// archive itself is not judged by it.
func (a *Opened) KeyIndex(ctx context.Context, stream string) (*busarchive.KeyIndex, error) {
	ki := a.keyIndexRef(stream)
	if ki == nil {
		return nil, nil
	}
	where := a.Where + ", key index of stream " + stream
	damaged := func(err error) error { return &kept.DamagedError{Path: where, Problems: ProblemSentences(err)} }
	raw, err := StoredKeyIndex(ctx, a.st, a.rel, a.rec, stream, where)
	if err != nil {
		return nil, err
	}
	if a.rec.Encrypted != nil {
		if raw, err = a.decrypt(raw); err != nil {
			return nil, lockedOrDamaged(err, a.rec, where)
		}
	}
	ix, err := busarchive.DecodeKeyIndex(raw)
	if err != nil {
		return nil, damaged(err)
	}
	sm := a.Manifest().Stream(stream)
	if ix.Stream != stream || sm == nil || len(sm.Entries) == 0 || ix.Size != sm.Entries[0].Size {
		return nil, damaged(fmt.Errorf("it indexes %d bytes of stream %s, not the archive's data entry of stream %s", ix.Size, ix.Stream, stream))
	}
	return ix, nil
}

// ReadIndexed reads the messages ms of ix from the archive's data entry of
// ix's stream, each checked against the index (busarchive.ReadIndexed).
func (a *Opened) ReadIndexed(ctx context.Context, ix *busarchive.KeyIndex, ms []busarchive.IndexedMessage, fn func(busarchive.ArchivedMessage) error) error {
	return busarchive.ReadIndexed(ctx, ix, ms, func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		return a.StreamDataRange(ctx, ix.Stream, off, n)
	}, fn)
}

// keyIndexRef is the record's key index of stream, or nil.
func (a *Opened) keyIndexRef(stream string) *kept.KeyIndex {
	if a.rec == nil || a.st == nil {
		return nil
	}
	for _, s := range a.rec.Streams {
		if s.Name == stream {
			return s.KeyIndex
		}
	}
	return nil
}

// StoredKeyIndex reads the key index that rec, the record at rel in st,
// names for stream, as it is stored (encrypted where rec is), checked
// against the record: its object's name, size and checksum. It needs no
// identity. Its error is a *kept.DamagedError at where.
func StoredKeyIndex(ctx context.Context, st store.Store, rel string, rec *kept.Point, stream, where string) ([]byte, error) {
	var ki *kept.KeyIndex
	for _, s := range rec.Streams {
		if s.Name == stream {
			ki = s.KeyIndex
		}
	}
	err := errors.New("its record names none")
	if ki != nil {
		err = layout.CheckKeyIndex(stream, ki, rec)
	}
	var raw []byte
	if err == nil {
		raw, err = readStored(ctx, st, rel+"/"+ki.Object, ki)
	}
	if err != nil {
		return nil, &kept.DamagedError{Path: where, Problems: ProblemSentences(err)}
	}
	return raw, nil
}

// CheckKeyIndex checks that ix is what an Indexer that keeps what keep
// chooses builds from the archive's data entry of ix's stream: the entry is
// read whole once more and indexed again, and the two encodings compared.
// Its error is a *kept.DamagedError naming the index.
func (a *Opened) CheckKeyIndex(ctx context.Context, ix *busarchive.KeyIndex, keep func(string) busarchive.KeepMode) error {
	where := a.Where + ", key index of stream " + ix.Stream
	rc, err := a.StreamData(ix.Stream)
	if err != nil {
		return fmt.Errorf("reading stream %s of %s to check its key index: %w", ix.Stream, a.Where, err)
	}
	defer rc.Close()
	x := busarchive.NewIndexer(ix.Stream, keep)
	_, err = io.Copy(x, readerCtx{ctx, rc})
	x.Close()
	if err != nil {
		x.Stop()
		return fmt.Errorf("reading stream %s of %s to check its key index: %w", ix.Stream, a.Where, err)
	}
	built, err := x.Index()
	var want, got []byte
	if err == nil {
		if want, err = built.Encode(); err == nil {
			got, err = ix.Encode()
		}
	}
	switch {
	case err != nil:
		return &kept.DamagedError{Path: where, Problems: []string{"the archive's data entry does not index again: " + err.Error()}}
	case !bytes.Equal(got, want):
		return &kept.DamagedError{Path: where, Problems: []string{fmt.Sprintf("it does not agree with the archive: it records %d message(s) in %d chunk(s), the archive's data entry indexes to %d in %d",
			len(ix.Messages), len(ix.Chunks), len(built.Messages), len(built.Chunks))}}
	}
	return nil
}

// readerCtx is a reader that stops when its context ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// maxStoredIndex bounds a stored key index: the encoding's bound, and the
// age framing of one that is encrypted.
const maxStoredIndex = busarchive.MaxKeyIndexSize + busarchive.MaxKeyIndexSize/1024 + 64<<10

// readStored reads the stored key index at key whole, checked against its
// record's size and checksum.
func readStored(ctx context.Context, st store.Store, key string, ki *kept.KeyIndex) ([]byte, error) {
	if ki.Size > maxStoredIndex {
		return nil, fmt.Errorf("its record gives it %d bytes, over the bound of %d", ki.Size, maxStoredIndex)
	}
	o, err := st.Open(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errors.New("it is missing from the store")
	}
	if err != nil {
		return nil, fmt.Errorf("opening it: %w", err)
	}
	defer o.Close()
	if o.Size() != ki.Size {
		return nil, fmt.Errorf("it is %d bytes but its record says %d", o.Size(), ki.Size)
	}
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}
	defer r.Close()
	sum := store.NewChecksum()
	raw, err := io.ReadAll(io.TeeReader(io.LimitReader(r, ki.Size), sum))
	if err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}
	if got := sum.Sum(); int64(len(raw)) != ki.Size || got != ki.Sum {
		return nil, fmt.Errorf("it reads as %d bytes with checksum %s, but its record says %d bytes with checksum %s", len(raw), got, ki.Size, ki.Sum)
	}
	return raw, nil
}

// decrypt is the plaintext of a key index encrypted as the archive is.
func (a *Opened) decrypt(raw []byte) ([]byte, error) {
	plain, err := a.open.Open(bytesObject(raw))
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	r, err := plain.Reader(context.Background(), 0, plain.Size())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// bytesObject is a store.Object of bytes in memory.
type bytesObject []byte

func (b bytesObject) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(b).ReadAt(p, off)
}
func (b bytesObject) Size() int64      { return int64(len(b)) }
func (b bytesObject) Info() store.Info { return store.Info{Size: int64(len(b))} }
func (b bytesObject) Close() error     { return nil }
func (b bytesObject) Reader(_ context.Context, off, n int64) (io.ReadCloser, error) {
	return io.NopCloser(io.NewSectionReader(b, off, n)), nil
}
