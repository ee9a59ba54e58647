package busarchive

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// File is what the writer writes to: an *os.File, a DirectFile or a
// store.Writer satisfies it. Bytes are written in order; WriteAt is used only
// to patch a data entry's size into the tar header it already wrote.
//
// Two methods are used when the File has them:
//   - Sync() error: Commit calls it last, and only a nil error commits (an
//     *os.File, a DirectFile). A File without it is made durable by its
//     owner (a store.Writer's Commit).
//   - Hold(off, n int64) and Release(): Hold is called with a data entry's
//     512-byte tar header just before it is written, Release just after its
//     size was patched in, so a File that uploads in parts keeps back only
//     the part that holds the header (a store.Writer).
type File interface {
	io.Writer
	io.WriterAt
}

// syncer is a File that makes what was written durable.
type syncer interface{ Sync() error }

// holder is a File that must be told which bytes WriteAt may still change.
type holder interface {
	Hold(off, n int64)
	Release()
}

// WriterInfo is what the writer records in the manifest besides the streams.
type WriterInfo struct {
	KeeperVersion string
	ServerVersion string
	Created       time.Time // zero means time.Now().UTC()
}

// Writer writes one bus.tar in one pass. One stream is written at a time.
//
// Contract: call Stream, feed the StreamWriter's Data and Meta (for instance
// through jsm.go's SnapshotToBuffer), then Finish or Abort it; repeat for
// each stream; then Commit. Only Commit writes manifest.json, the commit
// mark, and syncs the file (when it has Sync): an archive whose writer never
// reached Commit has no manifest and is refused as incomplete by Open. After
// any failure (a write error, an Abort, a bad backup.json) the Writer refuses
// everything else, because the file may hold a half-written entry; the
// caller removes the file. A Writer is safe for use from several goroutines,
// but its entries are written in call order, so the caller must not
// interleave two streams' data.
type Writer struct {
	mu      sync.Mutex
	f       File
	sync    syncer // f, when it syncs
	hold    holder // f, when it must be told what it holds
	info    WriterInfo
	off     int64 // offset in f of the next byte the writer writes
	err     error // the first failure; set, the archive can never be committed
	cur     *StreamWriter
	streams []StreamManifest
	names   map[string]bool
	done    bool
	wb      writeback // early writeback of what is written
}

// NewWriter starts an archive at the current end of f (normally an empty file).
// When f is an io.Seeker its current offset is where the archive starts;
// otherwise the archive starts at offset 0.
func NewWriter(f File, info WriterInfo) *Writer {
	w := &Writer{f: f, info: info, names: map[string]bool{}, streams: []StreamManifest{}}
	w.sync, _ = f.(syncer)
	w.hold, _ = f.(holder)
	if w.info.Created.IsZero() {
		w.info.Created = time.Now().UTC()
	}
	w.info.Created = w.info.Created.UTC()
	if s, ok := f.(io.Seeker); ok {
		off, err := s.Seek(0, io.SeekCurrent)
		if err != nil {
			w.err = fmt.Errorf("find where the archive starts in the file: %w, so nothing was written", err)
		}
		w.off = off
	}
	w.wb = newWriteback(f, w.off)
	return w
}

// Stream begins the named stream's entries. The previous stream must have been
// finished. The name must be a valid JetStream stream name.
func (w *Writer) Stream(name string) (*StreamWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, err
	}
	if w.cur != nil {
		return nil, fmt.Errorf("stream %s is still being written, so stream %s was not started", w.cur.name, printable(name))
	}
	if !ValidStreamName(name) {
		return nil, &EntryError{Entry: printable(name), Kind: ErrLayout, Detail: "not a valid stream name, so it was not added to the archive"}
	}
	if w.names[name] {
		return nil, &EntryError{Entry: DataEntry(name), Kind: ErrLayout, Detail: "the stream is already in the archive, so it was not added twice"}
	}
	if len(w.streams) >= MaxStreams {
		return nil, &EntryError{Entry: DataEntry(name), Kind: ErrTooLarge, Detail: fmt.Sprintf("the archive already holds %d streams, its most", MaxStreams)}
	}
	hdr, err := tarHeader(DataEntry(name), 0, w.info.Created)
	if err != nil {
		return nil, w.fail(err)
	}
	hdrOff := w.off + int64(len(hdr)) - blockSize // the entry's own header, after any PAX header
	if w.hold != nil {
		w.hold.Hold(hdrOff, blockSize)
	}
	if err := w.write(hdr); err != nil {
		return nil, err
	}
	s := newStreamWriter(w, name, hdr[len(hdr)-blockSize:], hdrOff)
	w.names[name] = true
	w.cur = s
	return s, nil
}

// Commit writes manifest.json last, then syncs the file when it has Sync.
// Only after Commit returns nil is the archive complete (for a File without
// Sync: once its owner made it durable).
func (w *Writer) Commit() (*Manifest, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, err
	}
	if w.cur != nil {
		return nil, fmt.Errorf("stream %s was neither finished nor aborted, so the archive was not committed", w.cur.name)
	}
	m := &Manifest{
		Format:        FormatVersion,
		KeeperVersion: w.info.KeeperVersion,
		ServerVersion: w.info.ServerVersion,
		Created:       w.info.Created,
		Streams:       w.streams,
	}
	b, err := sealManifest(m)
	if err != nil {
		return nil, w.fail(err)
	}
	if len(b) > MaxManifestSize {
		return nil, w.fail(&EntryError{Entry: ManifestName, Kind: ErrTooLarge, Detail: fmt.Sprintf("the manifest is %d bytes, over the bound of %d", len(b), MaxManifestSize)})
	}
	if err := w.writeEntry(ManifestName, b); err != nil {
		return nil, err
	}
	if err := w.write(make([]byte, 2*blockSize)); err != nil { // end-of-archive marker
		return nil, err
	}
	if w.sync != nil {
		if err := w.sync.Sync(); err != nil {
			return nil, w.fail(fmt.Errorf("sync the archive: %w", err))
		}
	}
	w.done = true
	out := *m
	out.Streams = append([]StreamManifest(nil), m.Streams...)
	return &out, nil
}

// usable says why the writer can take no more, or nil. Call with w.mu held.
func (w *Writer) usable() error {
	switch {
	case w.err != nil:
		return fmt.Errorf("the archive writer failed earlier, so the archive was not committed: %w", w.err)
	case w.done:
		return errors.New("the archive is already committed, so nothing more was written")
	}
	return nil
}

// fail records err as the writer's first failure and returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

// write appends p to the file. Call with w.mu held.
func (w *Writer) write(p []byte) error {
	n, err := w.f.Write(p)
	w.off += int64(n)
	w.wb.wrote(w.off)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return w.fail(fmt.Errorf("write the archive: %w, so the archive was not committed", err))
	}
	return nil
}

// writeEntry appends one whole entry whose bytes are in memory.
func (w *Writer) writeEntry(name string, data []byte) error {
	hdr, err := tarHeader(name, int64(len(data)), w.info.Created)
	if err != nil {
		return w.fail(err)
	}
	if err := w.write(hdr); err != nil {
		return err
	}
	if err := w.write(data); err != nil {
		return err
	}
	return w.write(make([]byte, padding(int64(len(data)))))
}
