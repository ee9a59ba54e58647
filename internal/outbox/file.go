package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The queue directory holds one file per act, named by its sequence in the
// queue (20 digits, so names sort as sequences), written whole through a
// temporary dot file. Set-aside files keep their name with damagedSuffix.
const (
	entrySuffix   = ".act"
	damagedSuffix = ".damaged"
	tempPrefix    = ".tmp-"
	seqDigits     = 20
	// entryFormat is the version of a queue file's shape.
	entryFormat = 1
	// maxEntry bounds a queue file: an act the acts stream takes (1 MiB)
	// and its envelope.
	maxEntry = 1<<20 + 4096
)

// fileEntry is a queue file: {"format":1,"act":{...}}.
type fileEntry struct {
	Format int        `json:"format"`
	Act    keeper.Act `json:"act"`
}

func entryName(seq uint64) string { return fmt.Sprintf("%0*d%s", seqDigits, seq, entrySuffix) }

// parseName is the sequence of a queue file's name, and whether it is one.
func parseName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, entrySuffix)
	if !ok || len(digits) != seqDigits {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil && seq > 0
}

func isTemp(name string) bool     { return strings.HasPrefix(name, tempPrefix) }
func isSetAside(name string) bool { return strings.HasSuffix(name, damagedSuffix) }

// encodeEntry is a's queue file, after checking that a is an act the
// keeper made: an id, a verb, a time.
func encodeEntry(a keeper.Act) ([]byte, error) {
	if err := checkAct(a); err != nil {
		return nil, err
	}
	b, err := json.Marshal(fileEntry{Format: entryFormat, Act: a})
	if err != nil {
		return nil, fmt.Errorf("encoding it: %w", err)
	}
	b = append(b, '\n')
	if len(b) > maxEntry {
		return nil, fmt.Errorf("it is %d bytes, over the %d a queue file holds: %w", len(b), maxEntry, keeper.ErrBadRequest)
	}
	return b, nil
}

// decodeEntry reads a queue file: outside input on a restart (anyone with
// the keeper's user may have changed it). It must be one JSON object of
// format 1, no unknown keys, nothing after it, holding an act with an id,
// a verb and a time.
func decodeEntry(b []byte) (keeper.Act, error) {
	if len(b) > maxEntry {
		return keeper.Act{}, fmt.Errorf("it is %d bytes, over the %d a queue file holds", len(b), maxEntry)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var e fileEntry
	if err := d.Decode(&e); err != nil {
		return keeper.Act{}, fmt.Errorf("it is not a queued act's JSON: %w", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return keeper.Act{}, errors.New("it holds more than one JSON value")
	}
	if e.Format != entryFormat {
		return keeper.Act{}, fmt.Errorf("its format is %d, not %d, the one this keeper reads", e.Format, entryFormat)
	}
	if err := checkAct(e.Act); err != nil {
		return keeper.Act{}, err
	}
	return e.Act, nil
}

// checkAct says why a is not an act the keeper made, or nil.
func checkAct(a keeper.Act) error {
	if a.ID == "" || len(a.ID) > keeper.MaxActID || keeper.CheckStreamName("id", a.ID) != nil {
		return fmt.Errorf("its id %q is not a plain name of 1 to %d bytes: %w", a.ID, keeper.MaxActID, keeper.ErrBadRequest)
	}
	if err := keeper.CheckStreamName("verb", a.Verb); err != nil {
		return fmt.Errorf("its verb: %w", err)
	}
	if a.Time.IsZero() {
		return fmt.Errorf("it has no time: %w", keeper.ErrBadRequest)
	}
	return nil
}

// writeEntry writes b as the queue file of seq in dir, whole: a temporary
// file (0600, never through a symlink) written, synced and closed, renamed
// into place, and the directory synced.
func writeEntry(dir string, seq uint64, b []byte) (err error) {
	tmp := filepath.Join(dir, tempPrefix+entryName(seq))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, entryName(seq))); err != nil {
		return fmt.Errorf("renaming %s into place: %w", tmp, err)
	}
	return syncDir(dir)
}

// readFile reads the queue file name in dir: a regular file (never through
// a symlink) of at most maxEntry bytes.
func readFile(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening it (a symlink is never followed): %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("it is not a regular file (%s)", st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEntry+1))
	if err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}
	return b, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening the acts queue directory %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the acts queue directory %s: %w", dir, err)
	}
	return nil
}
