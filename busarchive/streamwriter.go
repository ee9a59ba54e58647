package busarchive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
)

// StreamWriter takes one stream's snapshot: Data receives stream.arc.s2 as it
// arrives, Meta receives backup.json. Both may be handed to jsm.go's
// SnapshotToBuffer, which closes them; closing does not commit. Call Finish when
// the snapshot succeeded, Abort otherwise.
//
// Data may be written from another goroutine (jsm.go writes from its NATS
// subscription callback) while the caller waits; every method takes the
// Writer's lock, and writes that come after Finish, Abort or Close fail.
type StreamWriter struct {
	w      *Writer
	name   string
	hdr    []byte // the data entry's own 512-byte header, size still 0
	hdrOff int64  // where that header sits in the file
	n      int64  // data bytes written
	sum    hash.Hash
	meta   bytes.Buffer
	metaOK bool // false once backup.json went over its bound
	ended  bool // finished or aborted

	dataClosed, metaClosed bool
}

func newStreamWriter(w *Writer, name string, hdr []byte, hdrOff int64) *StreamWriter {
	return &StreamWriter{w: w, name: name, hdr: bytes.Clone(hdr), hdrOff: hdrOff, sum: sha256.New(), metaOK: true}
}

// Data is the writer for streams/<stream>/stream.arc.s2, hashed and counted as
// it is written.
func (s *StreamWriter) Data() io.WriteCloser { return dataWriter{s} }

// Meta is the writer for streams/<stream>/backup.json (bounded; held in memory
// until Finish).
func (s *StreamWriter) Meta() io.WriteCloser { return metaWriter{s} }

type dataWriter struct{ s *StreamWriter }

func (d dataWriter) Write(p []byte) (int, error) {
	s, w := d.s, d.s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := s.open(s.dataClosed); err != nil {
		return 0, err
	}
	if int64(len(p)) > MaxDataSize-s.n {
		return 0, w.fail(&EntryError{Entry: DataEntry(s.name), Kind: ErrTooLarge, Detail: fmt.Sprintf("the snapshot grew over %d bytes, so the archive was not committed", MaxDataSize)})
	}
	n, err := w.f.Write(p)
	w.off += int64(n)
	s.n += int64(n)
	s.sum.Write(p[:n])
	w.wb.wrote(w.off)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return n, w.fail(fmt.Errorf("write %s: %w, so the archive was not committed", DataEntry(s.name), err))
	}
	return n, nil
}

// Close marks the data complete from the sender's side; it commits nothing.
func (d dataWriter) Close() error {
	d.s.w.mu.Lock()
	defer d.s.w.mu.Unlock()
	d.s.dataClosed = true
	return nil
}

type metaWriter struct{ s *StreamWriter }

func (m metaWriter) Write(p []byte) (int, error) {
	s, w := m.s, m.s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := s.open(s.metaClosed); err != nil {
		return 0, err
	}
	if len(p) > MaxMetaSize-s.meta.Len() {
		s.metaOK = false
		return 0, &EntryError{Entry: MetaEntry(s.name), Kind: ErrTooLarge, Detail: fmt.Sprintf("backup.json is over %d bytes, so it was not kept", MaxMetaSize)}
	}
	return s.meta.Write(p)
}

// Close marks backup.json complete from the sender's side; it commits nothing.
func (m metaWriter) Close() error {
	m.s.w.mu.Lock()
	defer m.s.w.mu.Unlock()
	m.s.metaClosed = true
	return nil
}

// open says why the stream takes no more bytes, or nil. Call with w.mu held.
func (s *StreamWriter) open(closed bool) error {
	if err := s.w.usable(); err != nil {
		return err
	}
	switch {
	case s.ended:
		return fmt.Errorf("stream %s was already finished or aborted, so the bytes were not written", s.name)
	case closed:
		return fmt.Errorf("the writer of stream %s was closed, so the bytes were not written", s.name)
	}
	return nil
}

// Finish completes the stream's two entries and records them, with the
// configuration and state parsed from backup.json, for the manifest.
func (s *StreamWriter) Finish() (*StreamManifest, error) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := s.open(false); err != nil {
		return nil, err
	}
	s.ended = true
	w.cur = nil
	meta, err := s.parseMeta()
	if err != nil {
		return nil, w.fail(err)
	}
	if s.n == 0 {
		return nil, w.fail(&EntryError{Entry: DataEntry(s.name), Kind: ErrIncomplete, Detail: "no snapshot data arrived, so the stream was not recorded and the archive was not committed"})
	}
	if err := w.write(make([]byte, padding(s.n))); err != nil {
		return nil, err
	}
	setSize(s.hdr, s.n)
	if _, err := w.f.WriteAt(s.hdr, s.hdrOff); err != nil {
		return nil, w.fail(fmt.Errorf("write the size of %s into its tar header: %w, so the archive was not committed", DataEntry(s.name), err))
	}
	if w.hold != nil {
		w.hold.Release()
	}
	if err := w.writeEntry(MetaEntry(s.name), s.meta.Bytes()); err != nil {
		return nil, err
	}
	metaSum := sha256.Sum256(s.meta.Bytes())
	sm := streamManifestOf(s.name, meta, EntrySum{Name: DataEntry(s.name), Size: s.n, SHA256: hex.EncodeToString(s.sum.Sum(nil))},
		EntrySum{Name: MetaEntry(s.name), Size: int64(s.meta.Len()), SHA256: hex.EncodeToString(metaSum[:])})
	w.streams = append(w.streams, sm)
	s.meta = bytes.Buffer{}
	out := sm
	out.Entries = append([]EntrySum(nil), sm.Entries...)
	return &out, nil
}

// Abort gives the stream up. The archive can then no longer be committed: the
// file holds the stream's partial data and must be removed by the caller.
func (s *StreamWriter) Abort() {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	if w.cur == s {
		w.cur = nil
	}
	w.fail(fmt.Errorf("the snapshot of stream %s was aborted", s.name))
}

// backupMeta is backup.json as jsm.go and the nats CLI write it beside a
// snapshot: the configuration and state the server answered the snapshot
// request with. The configuration is kept as its bytes (see StreamConfig).
type backupMeta struct {
	Config StreamConfig `json:"config"`
	State  snapState    `json:"state"`
}

func (s *StreamWriter) parseMeta() (*backupMeta, error) {
	bad := func(kind error, why string) error {
		return &EntryError{Entry: MetaEntry(s.name), Kind: kind, Detail: why + ", so the stream was not recorded and the archive was not committed"}
	}
	if !s.metaOK {
		return nil, bad(ErrTooLarge, fmt.Sprintf("backup.json went over %d bytes", MaxMetaSize))
	}
	if s.meta.Len() == 0 {
		return nil, bad(ErrIncomplete, "backup.json is empty (jsm.go writes it only once every chunk has arrived)")
	}
	m, err := decodeMeta(s.meta.Bytes())
	if err != nil {
		return nil, bad(ErrFormat, err.Error())
	}
	if m.Config.Name != s.name {
		return nil, bad(ErrFormat, fmt.Sprintf("backup.json describes stream %q", printable(m.Config.Name)))
	}
	return m, nil
}

// decodeMeta parses backup.json.
func decodeMeta(b []byte) (*backupMeta, error) {
	var m backupMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("backup.json is not valid JSON: %w", err)
	}
	if m.State.Consumers < 0 {
		return nil, errors.New("backup.json gives a negative consumer count")
	}
	return &m, nil
}
