package keeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// countingWriter reports the bytes that pass through it.
type countingWriter struct {
	w    io.WriteCloser
	n    int64
	tick func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.tick(c.n)
	return n, err
}

func (c *countingWriter) Close() error { return c.w.Close() }

// releaseAfter is the archive size from which a snapshot or a restore gives
// its memory back to the system when it ends. Moving a large archive churns
// through the heap (nats.go allocates every snapshot chunk it receives); the
// Go runtime would return that memory only slowly, so the next large verb
// would start from a higher resident set. Returning it costs one collection.
const releaseAfter = 64 << 20

// verifyArchive fully verifies an opened archive and returns its manifest.
// Its error wraps ErrDamaged and lists every problem found.
func (k *Keeper) verifyArchive(ctx context.Context, a *openedArchive) (*busarchive.Manifest, *busarchive.Report, error) {
	return verifyOpened(ctx, a)
}

func verifyOpened(ctx context.Context, a *openedArchive) (*busarchive.Manifest, *busarchive.Report, error) {
	rep, err := a.Verify(ctx)
	if err != nil {
		return nil, rep, &DamagedError{Path: a.where, Problems: problemSentences(err)}
	}
	return a.Manifest(), rep, nil
}

// openedArchive is an archive opened from the store, with where it lies for
// sentences. Close it.
type openedArchive struct {
	*busarchive.Archive
	obj   store.Object
	where string
}

func (a *openedArchive) Close() error { return a.obj.Close() }

// openArchive opens the archive of the point or aside at rel in the
// keeper's store as openArchiveIn does, decrypting with the keeper's
// identity (serve --identity) where rec says it is encrypted.
func (k *Keeper) openArchive(ctx context.Context, rel string, rec *Point) (*openedArchive, error) {
	return openArchiveIn(ctx, k.store, rel, rec, k.abs(archiveKeyOf(rel, rec)), k.unseal)
}

// openArchiveIn opens the archive of the point or aside at rel in st as
// its plain bus.tar: rel/bus.tar, or rel/bus.tar.age decrypted with open
// when rec says it is encrypted. It is the one way every verb (restore,
// verify, set-aside, copy, export) reads an archive. It checks the stored
// object against its commit mark rec (its size, and its checksum where the
// store reports one; both of the ciphertext when encrypted), then the
// plaintext's layout and its manifest's seal, without reading the streams'
// data. Its error is a *DamagedError (an archive that cannot be opened at
// all is reported incomplete; one whose ciphertext does not decrypt,
// damaged), or, for an encrypted archive that open cannot decrypt (no
// identity, or the wrong one), one of ErrLocked, before anything is read
// past the age header. where names it for sentences.
func openArchiveIn(ctx context.Context, st store.Store, rel string, rec *Point, where string, open *agecrypt.Opener) (*openedArchive, error) {
	damaged := func(kind error, detail string) error {
		return &DamagedError{Path: where, Problems: problemSentences(&busarchive.EntryError{Kind: kind, Detail: detail})}
	}
	if rec != nil {
		if err := checkSealing(rec.Sealing); err != nil {
			return nil, damaged(busarchive.ErrLayout, err.Error())
		}
	}
	o, err := st.Open(ctx, archiveKeyOf(rel, rec))
	if errors.Is(err, store.ErrNotFound) {
		return nil, damaged(busarchive.ErrIncomplete, "the archive is missing from the store")
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", where, err)
	}
	if rec != nil && rec.ArchiveSize > 0 && o.Size() != rec.ArchiveSize {
		o.Close()
		return nil, damaged(busarchive.ErrChecksum, fmt.Sprintf("the archive is %d bytes but its record says %d", o.Size(), rec.ArchiveSize))
	}
	if sum := o.Info().Sum; rec != nil && rec.ArchiveSum != "" && sum != "" && sum != rec.ArchiveSum {
		o.Close()
		return nil, damaged(busarchive.ErrChecksum, fmt.Sprintf("the archive's checksum is %s but its record says %s", sum, rec.ArchiveSum))
	}
	var plain store.Object = o
	if rec != nil && rec.Encrypted != nil {
		if plain, err = open.Open(o); err != nil {
			o.Close()
			return nil, lockedOrDamaged(err, rec, where)
		}
		if rec.Encrypted.PlainSize > 0 && plain.Size() != rec.Encrypted.PlainSize { // 0: a record rebuilt without it
			plain.Close()
			return nil, damaged(busarchive.ErrChecksum, fmt.Sprintf("the archive decrypts to %d bytes but its record says %d", plain.Size(), rec.Encrypted.PlainSize))
		}
	}
	a, err := busarchive.Open(plain, plain.Size())
	if err != nil {
		plain.Close()
		if len(busarchive.Problems(err)) == 0 {
			err = &busarchive.EntryError{Kind: busarchive.ErrIncomplete, Detail: err.Error()}
		}
		return nil, &DamagedError{Path: where, Problems: problemSentences(err)}
	}
	return &openedArchive{Archive: a, obj: plain, where: where}, nil
}

// lockedOrDamaged is the error of an encrypted archive that did not
// decrypt: ErrLocked when no identity, or only other ones, were there.
func lockedOrDamaged(err error, rec *Point, where string) error {
	to := strings.Join(rec.Encrypted.Recipients, ", ")
	switch {
	case errors.Is(err, agecrypt.ErrNoIdentity):
		return Errorf(ErrLocked, "%s is encrypted to %s and this keeper has no --identity to decrypt it", where, to)
	case errors.Is(err, agecrypt.ErrWrongIdentity):
		return Errorf(ErrLocked, "%s is encrypted to %s and this keeper's --identity is none of them", where, to)
	case errors.Is(err, agecrypt.ErrDamaged):
		return &DamagedError{Path: where, Problems: []string{err.Error()}}
	}
	return fmt.Errorf("decrypting %s: %w", where, err)
}

func problemSentences(err error) []string {
	var out []string
	for _, p := range busarchive.Problems(err) {
		out = append(out, p.Error())
	}
	if len(out) == 0 && err != nil {
		out = append(out, err.Error())
	}
	return out
}

// ErrDamaged is wrapped by errors about archives that fail verification.
var ErrDamaged = errors.New("archive is damaged")

// DamagedError lists every problem found in one archive.
type DamagedError struct {
	Path     string   // the point or aside whose archive failed
	Problems []string // every problem found, one sentence each
}

// Error names the archive and its first five problems.
func (e *DamagedError) Error() string {
	s := fmt.Sprintf("%s failed verification with %d problem(s)", e.Path, len(e.Problems))
	for i, p := range e.Problems {
		if i == 5 {
			s += fmt.Sprintf("; and %d more", len(e.Problems)-5)
			break
		}
		s += "; " + p
	}
	return s
}

// Unwrap makes a DamagedError both ErrDamaged and ErrFailed for errors.Is.
func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, ErrFailed} }
