package busarchive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// A `nats backup stream` directory, as natscli writes it (natscli v0.5.0,
// jsm.go v0.5.0 Stream.SnapshotToDirectory):
//
//	<dir>/stream.arc.s2  the server's snapshot, byte for byte (NATS Server 2.15 and newer)
//	<dir>/backup.json    json.MarshalIndent({"config":…,"state":…}, "", "  "),
//	                     the configuration and state the server answered
//	                     the snapshot request with, written after the last chunk
//
// These are exactly the two entries bus.tar holds per stream. Older natscli
// (v0.4.x and before, jsm.go v0.4.x) named the data file stream.tar.s2
// whatever the server; against a 2.15 server it holds the same NATSARC1
// snapshot, so a directory with stream.tar.s2 is read too when its content
// is one. A stream.tar.s2 from a server before 2.15 holds the server's old
// tar snapshot, which a restore point cannot hold: it is refused, as is a
// directory holding both names (jsm.go refuses that too).
const LegacyDataName = "stream.tar.s2"

// ErrNotBackup is a directory that is not a whole, restorable `nats backup
// stream` directory of a NATS Server 2.15 snapshot.
var ErrNotBackup = errors.New("not a nats backup directory of a NATS Server 2.15 stream snapshot")

// BackupDirError is why one directory was refused.
type BackupDirError struct {
	Dir    string
	Detail string
}

func (e *BackupDirError) Error() string { return fmt.Sprintf("%s: %s", e.Dir, e.Detail) }

// Unwrap makes it ErrNotBackup for errors.Is.
func (e *BackupDirError) Unwrap() error { return ErrNotBackup }

// BackupDir is one `nats backup stream` directory, checked whole by
// CheckBackupDir.
type BackupDir struct {
	Dir      string       // as given
	Stream   string       // the stream backup.json names
	DataName string       // DataName, or LegacyDataName
	Meta     []byte       // backup.json, as read
	DataSize int64        // the data file's size
	DataSum  string       // its SHA-256, lower-case hex
	Report   StreamReport // what the snapshot holds, decoded
	// Held, set when the snapshot holds fewer messages than its state
	// says (a point's cut, exported), is what it holds, for the manifest
	// (Writer.SetCut): the first sequence left out is not known.
	Held *StreamCut
}

// CheckBackupDir reads the directory whole before anything is made of it:
// it is a directory (not a symbolic link) holding backup.json and one data
// file, regular files, neither followed through a symbolic link; backup.json
// decodes and names a valid stream; the snapshot decodes to its end
// sentinel, and its state.json and consumers agree with backup.json's state
// as in an archive's verification. Every refusal is a *BackupDirError (of
// ErrNotBackup) saying why.
func CheckBackupDir(ctx context.Context, dir string) (*BackupDir, error) {
	bad := func(format string, args ...any) error {
		return &BackupDirError{Dir: printable(dir), Detail: fmt.Sprintf(format, args...)}
	}
	st, err := os.Lstat(dir)
	switch {
	case err != nil:
		return nil, bad("it cannot be read (%v)", err)
	case st.Mode()&os.ModeSymlink != 0:
		return nil, bad("it is a symbolic link, which is never followed")
	case !st.IsDir():
		return nil, bad("it is not a directory")
	}
	bd := &BackupDir{Dir: dir}
	if bd.DataName, err = dataNameIn(dir); err != nil {
		return nil, bad("%v", err)
	}
	mf, err := openNoFollow(filepath.Join(dir, MetaName))
	if err != nil {
		return nil, bad("%s: %v (natscli writes it after the last chunk: a backup without it did not finish)", MetaName, err)
	}
	bd.Meta, err = io.ReadAll(io.LimitReader(mf, MaxMetaSize+1))
	mf.Close()
	switch {
	case err != nil:
		return nil, bad("%s cannot be read: %v", MetaName, err)
	case len(bd.Meta) > MaxMetaSize:
		return nil, bad("%s is over %d bytes", MetaName, MaxMetaSize)
	case len(bd.Meta) == 0:
		return nil, bad("%s is empty: the backup did not finish", MetaName)
	}
	meta, err := decodeMeta(bd.Meta)
	if err != nil {
		return nil, bad("%v", err)
	}
	if !ValidStreamName(meta.Config.Name) {
		return nil, bad("%s names stream %q, which is not a valid stream name", MetaName, printable(meta.Config.Name))
	}
	bd.Stream = meta.Config.Name
	df, err := openNoFollow(filepath.Join(dir, bd.DataName))
	if err != nil {
		return nil, bad("%s: %v", bd.DataName, err)
	}
	defer df.Close()
	if err := bd.checkData(ctx, df, meta); err != nil {
		return nil, bad("%s %v", bd.DataName, err)
	}
	return bd, nil
}

// dataNameIn says which data file the directory holds.
func dataNameIn(dir string) (string, error) {
	_, arcErr := os.Lstat(filepath.Join(dir, DataName))
	_, tarErr := os.Lstat(filepath.Join(dir, LegacyDataName))
	switch {
	case arcErr == nil && tarErr == nil:
		return "", fmt.Errorf("it holds both %s and %s, so which one is the backup is not known", DataName, LegacyDataName)
	case arcErr == nil:
		return DataName, nil
	case tarErr == nil:
		return LegacyDataName, nil
	case !errors.Is(arcErr, os.ErrNotExist):
		return "", fmt.Errorf("%s: %v", DataName, arcErr)
	}
	return "", fmt.Errorf("it holds neither %s nor %s, the snapshot a nats backup directory holds", DataName, LegacyDataName)
}

// checkData decodes the snapshot whole, hashing it, and compares it with
// backup.json's state.
func (bd *BackupDir) checkData(ctx context.Context, f *os.File, meta *backupMeta) error {
	if st, err := f.Stat(); err != nil {
		return fmt.Errorf("cannot be read: %v", err)
	} else if st.Size() > MaxDataSize {
		return fmt.Errorf("is %d bytes, over the bound of %d", st.Size(), MaxDataSize)
	}
	// One pass: the file is hashed as it is read, s2-decoded once; its
	// first bytes say what it is.
	h := sha256.New()
	r := &hashingReader{ctx: ctx, r: io.NewSectionReader(f, 0, MaxDataSize), h: h}
	plain := s2.NewReader(r)
	head := make([]byte, len(archive.MagicBytes))
	if _, err := io.ReadFull(plain, head); err != nil {
		return fmt.Errorf("does not decode: its first bytes are not whole s2 (%v): it is damaged or truncated", err)
	}
	if !bytes.Equal(head, []byte(archive.MagicBytes)) {
		if legacyTar(f) {
			return errors.New("holds the tar snapshot of a NATS Server before 2.15, which a restore point cannot hold; " +
				"restore it into a 2.15 server with `nats backup restore stream` and take the point there")
		}
		return errors.New("is not a NATS Server 2.15 stream snapshot (an s2-compressed NATSARC1 archive)")
	}
	dec := newPlainSnapDecoder(io.MultiReader(bytes.NewReader(head), plain))
	rep := StreamReport{Name: bd.Stream}
	var state *snapState
	var stored uint64 // the messages' bytes as the server counts them
	memory := StoredInMemory(meta.Config.Raw)
	for !rep.Complete {
		item, err := dec.next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("was not read whole: %w", ctx.Err())
			}
			return fmt.Errorf("does not decode: %v", err)
		}
		if item == itemState {
			state = &dec.state
		}
		if item == itemMessage {
			stored += StoredSize(memory, len(dec.hdr.Name), int(dec.hdr.HeaderSize), int(dec.hdr.PayloadSize))
		}
		dec.tally(item, &rep)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("does not read to its end: %v", err)
	}
	want := StreamState{FirstSeq: meta.State.FirstSeq, LastSeq: meta.State.LastSeq, Msgs: meta.State.Msgs,
		Bytes: meta.State.Bytes, Consumers: meta.State.Consumers}
	if ps := compareState(bd.DataName, want, state, &rep); len(ps) > 0 {
		return fmt.Errorf("disagrees with %s: %v", MetaName, errors.Join(ps...))
	}
	bd.DataSize, bd.DataSum, bd.Report = r.n, hex.EncodeToString(h.Sum(nil)), rep
	if rep.Messages < want.Msgs {
		bd.Held = &StreamCut{Msgs: rep.Messages, Bytes: stored, FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq}
	}
	return nil
}

// legacyTar reports whether f is an s2-compressed tar (ustar magic at 257).
func legacyTar(f *os.File) bool {
	b := make([]byte, 263)
	n, _ := io.ReadFull(s2.NewReader(io.NewSectionReader(f, 0, MaxDataSize)), b)
	return n == len(b) && string(b[257:262]) == "ustar"
}

// OpenData opens the directory's data file again for reading, without
// following a symbolic link. The caller checks what it reads against
// DataSize and DataSum: the file may have changed since it was checked.
func (bd *BackupDir) OpenData() (*os.File, error) {
	return openNoFollow(filepath.Join(bd.Dir, bd.DataName))
}

// openNoFollow opens a regular file for reading, never through a symbolic link.
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("it is a symbolic link, which is never followed")
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("it is not a regular file (%s)", st.Mode().Type())
	}
	return f, nil
}
