package busarchive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Report is what a verification found.
type Report struct {
	Streams []StreamReport `json:"streams"`
	Bytes   int64          `json:"bytes"` // entry bytes read and hashed
}

// StreamReport is one stream's verification: what its stream.arc.s2 holds,
// as decoded.
type StreamReport struct {
	Name      string `json:"name"`
	Messages  uint64 `json:"messages"`
	Consumers int    `json:"consumers"`
	FirstSeq  uint64 `json:"first_seq"` // of the first message found, 0 when none
	LastSeq   uint64 `json:"last_seq"`  // of the last message found, 0 when none
	Complete  bool   `json:"complete"`  // decoded to its end sentinel and no problem found
}

// Verify re-reads every entry, recomputes sizes and SHA-256, decodes each
// stream archive to its end sentinel and compares with the manifest. It
// collects every problem (errors.Join of *EntryError) instead of stopping at the
// first. It reads each stream archive once, front to back, with bounded
// memory, hashing every block on one core while the decoder reads it on
// another. It
// stops early only when ctx ends (the joined error then also wraps ctx.Err()).
// The Report is returned even with problems.
func (a *Archive) Verify(ctx context.Context) (*Report, error) {
	rep := &Report{Streams: make([]StreamReport, 0, len(a.manifest.Streams))}
	var problems []error
	for i := range a.manifest.Streams {
		sm := &a.manifest.Streams[i]
		if err := ctx.Err(); err != nil {
			problems = append(problems, fmt.Errorf("verification stopped before stream %s: %w", sm.Name, err))
			break
		}
		sr, n, ps := a.verifyStream(ctx, sm)
		rep.Streams = append(rep.Streams, sr)
		rep.Bytes += n
		problems = append(problems, ps...)
	}
	return rep, errors.Join(problems...)
}

// VerifyFile opens and verifies the archive at path; problems opening it are
// returned as *EntryError too.
func VerifyFile(ctx context.Context, path string) (*Report, error) {
	a, c, err := OpenFile(path)
	if err != nil {
		if len(Problems(err)) == 0 {
			err = &EntryError{Kind: ErrIncomplete, Detail: err.Error()}
		}
		return nil, err
	}
	defer c.Close()
	return a.Verify(ctx)
}

// verifyStream checks one stream's two entries. It returns the stream's
// report, the bytes it read and its problems.
func (a *Archive) verifyStream(ctx context.Context, sm *StreamManifest) (StreamReport, int64, []error) {
	var problems []error
	dataName := DataEntry(sm.Name)

	// stream.arc.s2: read once, front to back (dataSource): from a file,
	// straight from the disk where the file system allows (openDirect), else
	// through the page cache with readahead and drop-behind; from an archive
	// that reads ranges, in one ranged read. Each block is hashed on one core
	// and decoded on the other (SHA-256 alone is about as slow as
	// s2-decoding and walking every message).
	loc := a.entries[dataName]
	h := newVerifyHash()
	tee := startHashTee(ctx, a.dataSource(ctx, loc), h, 1)
	dec := tee.sides[0]
	d := decodeStream(ctx, sm.Name, dec, dec.stopped)
	rep, decodeProblems := d.rep, d.heldTo(sm)
	n, err := tee.wait()
	if err != nil {
		problems = append(problems, fmt.Errorf("verification of %s stopped: %w", dataName, err))
		return rep, n, append(problems, decodeProblems...)
	}
	sums := sumProblems(sm.Entries[0], n, h)
	if len(sums) == 0 {
		a.noteVerified(sm.Name, h.crc.Sum32())
	}
	problems = append(problems, sums...)
	problems = append(problems, decodeProblems...)

	mn, mps := a.verifyMeta(ctx, sm)
	problems = append(problems, mps...)
	rep.Complete = rep.Complete && len(problems) == 0
	return rep, n + mn, problems
}

// verifyMeta checks one stream's backup.json, which Open bounds, read whole:
// its size and SHA-256, that it decodes, and that it names the stream. It
// returns the bytes it read and its problems.
func (a *Archive) verifyMeta(ctx context.Context, sm *StreamManifest) (int64, []error) {
	metaName := MetaEntry(sm.Name)
	mloc := a.entries[metaName]
	var r io.Reader = io.NewSectionReader(a.r, mloc.off, mloc.size)
	if rc, ok, err := entryReader(ctx, a.r, mloc.off, mloc.size); ok {
		if err != nil {
			return 0, []error{fmt.Errorf("verification of %s stopped: %w", metaName, err)}
		}
		defer rc.Close()
		r = rc
	}
	mr := &hashingReader{ctx: ctx, r: r, h: sha256.New()}
	raw, err := io.ReadAll(mr)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // a ranged read that ended early: the size check says so, as for a short file
	}
	if err != nil {
		return mr.n, []error{fmt.Errorf("verification of %s stopped: %w", metaName, err)}
	}
	problems := sumProblems(sm.Entries[1], mr.n, mr.h)
	return mr.n, append(problems, metaProblems(sm, raw)...)
}

// metaProblems checks a stream's backup.json, raw: that it decodes and
// that it names the stream.
func metaProblems(sm *StreamManifest, raw []byte) []error {
	metaName := MetaEntry(sm.Name)
	if meta, err := decodeMeta(raw); err != nil {
		return []error{&EntryError{Entry: metaName, Kind: ErrFormat, Detail: err.Error()}}
	} else if meta.Config.Name != sm.Name {
		return []error{&EntryError{Entry: metaName, Kind: ErrFormat, Detail: fmt.Sprintf("backup.json describes stream %q, so a restore would be refused", printable(meta.Config.Name))}}
	}
	return nil
}

// sumProblems compares what was read (n bytes hashed into h) with the
// manifest's entry.
func sumProblems(e EntrySum, n int64, h hash.Hash) []error {
	var out []error
	if n != e.Size {
		out = append(out, &EntryError{Entry: e.Name, Kind: ErrChecksum, Detail: fmt.Sprintf("read %d bytes, the manifest declares %d", n, e.Size)})
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		out = append(out, &EntryError{Entry: e.Name, Kind: ErrChecksum, Detail: fmt.Sprintf("SHA-256 is %s, the manifest says %s", got, printable(e.SHA256))})
	}
	return out
}

// hashingReader hashes (when h is set) and counts what is read through it,
// and stops when ctx ends.
type hashingReader struct {
	ctx context.Context
	r   io.Reader
	h   hash.Hash
	n   int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	if err := h.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := h.r.Read(p)
	if h.h != nil {
		h.h.Write(p[:n])
	}
	h.n += int64(n)
	return n, err
}

// verifyBlock is the size of the verification's reads.
const verifyBlock = 1 << 20
