package busarchive

// This file fixes the package's API so the other packages can be written against
// it. Its bodies are replaced by the real implementation (writer.go, reader.go,
// verify.go); delete this file when they land.

import (
	"context"
	"errors"
	"io"
	"time"
)

var errUnimplemented = errors.New("busarchive: not implemented yet")

// File is what the writer writes to: an *os.File satisfies it. WriteAt is used
// only to patch a data entry's size into the tar header it already wrote.
type File interface {
	io.Writer
	io.WriterAt
	Sync() error
}

// WriterInfo is what the writer records in the manifest besides the streams.
type WriterInfo struct {
	KeeperVersion string
	ServerVersion string
	Created       time.Time // zero means time.Now().UTC()
}

// Writer writes one bus.tar in one pass. One stream is written at a time.
type Writer struct{}

// NewWriter starts an archive at the current end of f (normally an empty file).
func NewWriter(f File, info WriterInfo) *Writer { return &Writer{} }

// StreamWriter takes one stream's snapshot: Data receives stream.arc.s2 as it
// arrives, Meta receives backup.json. Both may be handed to jsm.go's
// SnapshotToBuffer, which closes them; closing does not commit. Call Finish when
// the snapshot succeeded, Abort otherwise.
type StreamWriter struct{}

// Stream begins the named stream's entries. The previous stream must have been
// finished. The name must be a valid JetStream stream name.
func (w *Writer) Stream(name string) (*StreamWriter, error) { return nil, errUnimplemented }

// Data is the writer for streams/<stream>/stream.arc.s2, hashed and counted as
// it is written.
func (s *StreamWriter) Data() io.WriteCloser { return nil }

// Meta is the writer for streams/<stream>/backup.json (bounded; held in memory
// until Finish).
func (s *StreamWriter) Meta() io.WriteCloser { return nil }

// Finish completes the stream's two entries and records them, with the
// configuration and state parsed from backup.json, for the manifest.
func (s *StreamWriter) Finish() (*StreamManifest, error) { return nil, errUnimplemented }

// Commit writes manifest.json last, then syncs the file. Only after Commit
// returns nil is the archive complete.
func (w *Writer) Commit() (*Manifest, error) { return nil, errUnimplemented }

// Archive is an opened bus.tar.
type Archive struct{}

// Open reads the tar headers of r (seeking over the data), checks the layout
// and reads the manifest. It does not read the data: see Verify.
func Open(r io.ReaderAt, size int64) (*Archive, error) { return nil, errUnimplemented }

// OpenFile opens the bus.tar at path without following a symlink. Close it.
func OpenFile(path string) (*Archive, io.Closer, error) { return nil, nil, errUnimplemented }

// Manifest is the archive's manifest.
func (a *Archive) Manifest() *Manifest { return nil }

// Streams are the archive's streams, in archive order.
func (a *Archive) Streams() []string { return nil }

// StreamData reads streams/<stream>/stream.arc.s2 straight from the tar.
func (a *Archive) StreamData(stream string) (io.ReadCloser, error) { return nil, errUnimplemented }

// StreamMeta reads streams/<stream>/backup.json straight from the tar.
func (a *Archive) StreamMeta(stream string) (io.ReadCloser, error) { return nil, errUnimplemented }

// Report is what a verification found.
type Report struct {
	Streams []StreamReport `json:"streams"`
	Bytes   int64          `json:"bytes"`
}

// StreamReport is one stream's verification.
type StreamReport struct {
	Name      string `json:"name"`
	Messages  uint64 `json:"messages"`
	Consumers int    `json:"consumers"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Complete  bool   `json:"complete"`
}

// Verify re-reads every entry, recomputes sizes and SHA-256, decodes each
// stream archive to its end sentinel and compares with the manifest. It
// collects every problem (errors.Join of *EntryError) instead of stopping at the
// first.
func (a *Archive) Verify(ctx context.Context) (*Report, error) { return nil, errUnimplemented }

// VerifyFile opens and verifies the archive at path; problems opening it are
// returned as *EntryError too.
func VerifyFile(ctx context.Context, path string) (*Report, error) { return nil, errUnimplemented }
