// Package archives owns the reading of a point's or an aside's archive as
// the store holds it: Open checks the stored object against its record (its
// size, its checksum, its sealing), decrypts an encrypted one, and checks
// the plaintext's layout and its manifest's seal; Verify reads it whole;
// ProblemSentences says what was found. It is the one way the engine
// (restore, verify, set-aside) and the tools over a store (copy, export,
// package transfer) read an archive, so they say the same of a damaged or
// locked one.
//
// It imports the contract (kept), the store's layout (keeper/layout), the
// store, the archive format (busarchive) and its encryption (agecrypt);
// never the engine.
package archives

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// Verify fully verifies an opened archive and returns its manifest.
// Its error wraps kept.ErrDamaged and lists every problem found.
func Verify(ctx context.Context, a *Opened) (*busarchive.Manifest, *busarchive.Report, error) {
	rep, err := a.Verify(ctx)
	if err != nil {
		return nil, rep, &kept.DamagedError{Path: a.Where, Problems: ProblemSentences(err)}
	}
	return a.Manifest(), rep, nil
}

// Opened is an archive opened from the store, with where it lies for
// sentences. Close it.
type Opened struct {
	*busarchive.Archive
	obj   store.Object
	Where string
	// What it was opened from, for its key indexes (keyindex.go).
	st   store.Store
	rel  string
	rec  *kept.Point
	open *agecrypt.Opener
}

// Close closes the stored object the archive is read from.
func (a *Opened) Close() error { return a.obj.Close() }

// Open opens the archive of the point or aside at rel in st as
// its plain bus.tar: rel/bus.tar, or rel/bus.tar.age decrypted with open
// when rec says it is encrypted. It is the one way every verb (restore,
// verify, set-aside, copy, export) reads an archive. It checks the stored
// object against its commit mark rec (its size, and its checksum where the
// store reports one; both of the ciphertext when encrypted), then the
// plaintext's layout and its manifest's seal, without reading the streams'
// data. Its error is a *kept.DamagedError (an archive that cannot be opened
// at all is reported incomplete; one whose ciphertext does not decrypt,
// damaged), or, for an encrypted archive that open cannot decrypt (no
// identity, or the wrong one), one of kept.ErrLocked, before anything is
// read past the age header. where names it for sentences.
func Open(ctx context.Context, st store.Store, rel string, rec *kept.Point, where string, open *agecrypt.Opener) (*Opened, error) {
	damaged := func(kind error, detail string) error {
		return &kept.DamagedError{Path: where, Problems: ProblemSentences(&busarchive.EntryError{Kind: kind, Detail: detail})}
	}
	if rec != nil {
		if err := layout.CheckSealing(rec.Sealing); err != nil {
			return nil, damaged(busarchive.ErrLayout, err.Error())
		}
	}
	o, err := st.Open(ctx, layout.ArchiveKeyOf(rel, rec))
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
		return nil, &kept.DamagedError{Path: where, Problems: ProblemSentences(err)}
	}
	return &Opened{Archive: a, obj: plain, Where: where, st: st, rel: rel, rec: rec, open: open}, nil
}

// lockedOrDamaged is the error of an encrypted archive that did not
// decrypt: kept.ErrLocked when no identity, or only other ones, were there.
func lockedOrDamaged(err error, rec *kept.Point, where string) error {
	to := strings.Join(rec.Encrypted.Recipients, ", ")
	switch {
	case errors.Is(err, agecrypt.ErrNoIdentity):
		return kept.Errorf(kept.ErrLocked, "%s is encrypted to %s and this keeper has no --identity to decrypt it", where, to)
	case errors.Is(err, agecrypt.ErrWrongIdentity):
		return kept.Errorf(kept.ErrLocked, "%s is encrypted to %s and this keeper's --identity is none of them", where, to)
	case errors.Is(err, agecrypt.ErrDamaged):
		return &kept.DamagedError{Path: where, Problems: []string{err.Error()}}
	}
	return fmt.Errorf("decrypting %s: %w", where, err)
}

// ProblemSentences is a sentence for each problem busarchive found in err
// (err's own sentence when it names none).
func ProblemSentences(err error) []string {
	var out []string
	for _, p := range busarchive.Problems(err) {
		out = append(out, p.Error())
	}
	if len(out) == 0 && err != nil {
		out = append(out, err.Error())
	}
	return out
}
