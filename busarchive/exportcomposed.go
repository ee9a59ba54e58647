package busarchive

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// StreamComposer writes one stream of an archive that is composed as it is
// written out rather than read from a store: its stream.arc.s2 into data
// and its backup.json into meta.
type StreamComposer func(ctx context.Context, stream string, data, meta io.Writer) error

// ExportComposed writes each of streams as a `nats backup stream`
// directory, as ExportDirs does (nothing visible at target until every
// stream is whole, the same refusals of target), each stream composed by
// compose. Each is checked as it is written, as a keeper checks the point
// of a moment it composes (StreamCheck): its data decoded whole, on another
// core, and held with its backup.json to the manifest entry a Writer
// would record of them (the sequences, messages and bytes backup.json
// declares, the configuration's name). A stream that fails the check
// fails the export.
func ExportComposed(ctx context.Context, target string, streams []string, compose StreamComposer) ([]ExportedStream, error) {
	return exportDirs(ctx, target, streams, func(ctx context.Context, stream, dir string) (int64, error) {
		return composeStream(ctx, stream, dir, compose)
	})
}

// composeStream makes dir and writes stream's two files into it with
// compose, checked as they are written, and returns the data's size.
func composeStream(ctx context.Context, stream, dir string, compose StreamComposer) (int64, error) {
	if !ValidStreamName(stream) {
		return 0, &EntryError{Entry: printable(stream), Kind: ErrLayout, Detail: "not a valid stream name, so it was not written"}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(filepath.Join(dir, DataName), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	c, err := CheckComposed(ctx, stream, bw, compose)
	if err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write %s: %w", DataName, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("write %s: %w", DataName, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write %s: %w", DataName, err)
	}
	if _, err := writeNew(filepath.Join(dir, MetaName), bytes.NewReader(c.Meta)); err != nil {
		return 0, err
	}
	return c.Size, syncDir(dir)
}

// Composed is one stream composed and checked by CheckComposed.
type Composed struct {
	Manifest *StreamManifest // the entry a Writer would record of it (no data SHA-256)
	Report   StreamReport    // what was decoded
	Size     int64           // the data's bytes
	Meta     []byte          // its backup.json
}

// CheckComposed composes stream with compose, its data into data as well
// (io.Discard: only checked), and checks it as it is written, as a keeper
// checks the point of a moment it writes: the data decoded whole on
// another goroutine (StreamCheck) and held, with its backup.json, to the
// manifest entry a Writer would record of them. A problem found is an
// error (errors.Join of *EntryError).
func CheckComposed(ctx context.Context, stream string, data io.Writer, compose StreamComposer) (*Composed, error) {
	check := NewStreamCheck(ctx, stream)
	defer check.Close()
	cw := &countingWriter{w: io.MultiWriter(data, check)}
	meta := &boundedMeta{name: stream}
	if err := compose(ctx, stream, cw, meta); err != nil {
		return nil, err
	}
	sm, err := composedManifest(stream, cw.n, meta.buf.Bytes())
	if err != nil {
		return nil, err
	}
	rep, _, err := check.Hold(sm, meta.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the stream was checked as it was written: %w", err)
	}
	return &Composed{Manifest: sm, Report: rep, Size: cw.n, Meta: meta.buf.Bytes()}, nil
}

// composedManifest is the manifest entry a Writer would record of a
// stream whose data is n bytes and whose backup.json is meta. The data's
// SHA-256 is left out: nothing holds the bytes to it (StreamCheck.Hold
// holds their count).
func composedManifest(stream string, n int64, meta []byte) (*StreamManifest, error) {
	bm, err := decodeMeta(meta)
	if err != nil {
		return nil, &EntryError{Entry: MetaEntry(stream), Kind: ErrFormat, Detail: err.Error()}
	}
	metaSum := sha256.Sum256(meta)
	sm := streamManifestOf(stream, bm, EntrySum{Name: DataEntry(stream), Size: n},
		EntrySum{Name: MetaEntry(stream), Size: int64(len(meta)), SHA256: hex.EncodeToString(metaSum[:])})
	return &sm, nil
}

// streamManifestOf is the manifest entry of stream, its backup.json
// parsed as bm, with its two entries' sums.
func streamManifestOf(stream string, bm *backupMeta, data, meta EntrySum) StreamManifest {
	return StreamManifest{
		Name:   stream,
		Config: bm.Config,
		State: StreamState{
			FirstSeq:  bm.State.FirstSeq,
			LastSeq:   bm.State.LastSeq,
			Msgs:      bm.State.Msgs,
			Bytes:     bm.State.Bytes,
			Consumers: bm.State.Consumers,
		},
		Entries: []EntrySum{data, meta},
	}
}

// countingWriter counts what is written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// boundedMeta holds a backup.json as it is written, up to MaxMetaSize.
type boundedMeta struct {
	name string
	buf  bytes.Buffer
}

func (m *boundedMeta) Write(p []byte) (int, error) {
	if len(p) > MaxMetaSize-m.buf.Len() {
		return 0, &EntryError{Entry: MetaEntry(m.name), Kind: ErrTooLarge, Detail: fmt.Sprintf("backup.json is over %d bytes, so it was not kept", MaxMetaSize)}
	}
	return m.buf.Write(p)
}
