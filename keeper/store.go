package keeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// storeFile names the keeper directory's identity; the index's "store"
// record names the directory it belongs to.
const (
	storeFile = "store.json"
	storeKey  = "store"
)

// storeID is store.json: the identity of a keeper directory, made once.
type storeID struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

// storeRecord is the index's record of the directory it belongs to.
type storeRecord struct {
	ID    string    `json:"id"`
	Dir   string    `json:"dir"`  // as the keeper that claimed it saw it
	Host  string    `json:"host"` // where that keeper ran
	Since time.Time `json:"since"`
}

// ErrOtherStore is wrapped by the error of New when the index belongs to
// another keeper directory.
var ErrOtherStore = errors.New("the index belongs to another keeper directory")

// claimStore ties the index to this keeper's directory, or refuses: a keeper
// whose directory is not the one the index belongs to would rebuild the
// index from files that are not its records and remove them. The first
// keeper on an index records its directory's id (made on first use); one
// with another directory, or with an empty one where the index already
// holds records, is refused with a sentence naming both directories.
func (k *Keeper) claimStore(ctx context.Context) error {
	local, err := k.readStoreID()
	if err != nil {
		return err
	}
	data, err := k.index.Get(ctx, storeKey)
	switch {
	case errors.Is(err, ErrNotFound):
		if local == nil {
			if err := k.foreignRecords(ctx); err != nil {
				return err
			}
			if local, err = k.makeStoreID(); err != nil {
				return err
			}
		}
		host, _ := os.Hostname()
		rec, _ := json.Marshal(storeRecord{ID: local.ID, Dir: k.dir, Host: host, Since: k.now().UTC()})
		if _, err := k.index.Create(ctx, storeKey, rec); err == nil {
			k.log.Info("the index now belongs to this keeper directory", "dir", k.dir, "store", local.ID)
			return nil
		} else if !errors.Is(err, ErrExists) {
			return fmt.Errorf("recording which directory the index belongs to: %w", withKind(ErrNoBus, err))
		}
		// Another keeper claimed it meanwhile: compare with its record.
		if data, err = k.index.Get(ctx, storeKey); err != nil {
			return fmt.Errorf("reading which directory the index belongs to: %w", withKind(ErrNoBus, err))
		}
	case err != nil:
		return fmt.Errorf("reading which directory the index belongs to: %w", withKind(ErrNoBus, err))
	}
	var rec storeRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.ID == "" {
		return errorf(ErrFailed, "the index's store record is not readable (%v), so this keeper cannot tell whether the index is its own; nothing was started", err)
	}
	if local == nil || local.ID != rec.ID {
		mine := "has no store id yet"
		if local != nil {
			mine = "is store " + local.ID
		}
		return &kindError{kind: ErrConflict, err: fmt.Errorf("%w: it belongs to %s on host %s (store %s, since %s), and this keeper's directory %s %s; "+
			"run this keeper with that same directory (shared by every keeper of the index), or give it an index and verbs of its own "+
			"with another --bucket and --prefix, so nothing was started and no record was changed",
			ErrOtherStore, rec.Dir, rec.Host, rec.ID, rec.Since.Format(time.RFC3339), k.dir, mine)}
	}
	return nil
}

// foreignRecords refuses to claim an index that holds point or aside
// records of which this directory holds none: they are another directory's.
func (k *Keeper) foreignRecords(ctx context.Context) error {
	var keys []string
	for _, prefix := range []string{"point.", "aside."} {
		ks, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return fmt.Errorf("listing the index: %w", withKind(ErrNoBus, err))
		}
		keys = append(keys, ks...)
	}
	if len(keys) == 0 {
		return nil
	}
	for _, key := range keys {
		data, err := k.index.Get(ctx, key)
		if err != nil {
			continue
		}
		var rec struct {
			Dir string `json:"dir"`
		}
		if json.Unmarshal(data, &rec) == nil && rec.Dir != "" && !strings.Contains(rec.Dir, "..") {
			if _, err := os.Lstat(k.abs(rec.Dir)); err == nil {
				return nil // this directory holds records of the index: it is the index's
			}
		}
	}
	return &kindError{kind: ErrConflict, err: fmt.Errorf("%w: the index holds %d point and aside record(s) and this keeper's directory %s holds none of them; "+
		"run this keeper with the directory those records are in, or give it an index and verbs of its own with another --bucket and --prefix, "+
		"so nothing was started and no record was changed", ErrOtherStore, len(keys), k.dir)}
}

func (k *Keeper) readStoreID() (*storeID, error) {
	var s storeID
	err := readJSON(filepath.Join(k.dir, storeFile), &s)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil || s.ID == "" {
		return nil, errorf(ErrFailed, "the keeper directory's %s is not readable (%v), so nothing was started", storeFile, err)
	}
	return &s, nil
}

// makeStoreID makes the directory's store.json, once: written to a
// temporary file, synced and linked into place, so two keepers starting on
// one new directory at once agree on the one that was linked first.
func (k *Keeper) makeStoreID() (*storeID, error) {
	var b [16]byte
	rand.Read(b[:])
	s := &storeID{ID: hex.EncodeToString(b[:]), Created: k.now().UTC()}
	fail := func(err error) (*storeID, error) {
		return nil, errorf(ErrFailed, "writing the keeper directory's %s: %v, so nothing was started", storeFile, err)
	}
	tmp := filepath.Join(k.dir, "."+storeFile+"."+s.ID)
	if err := writeJSONDurable(tmp, s); err != nil {
		return fail(err)
	}
	defer os.Remove(tmp)
	err := os.Link(tmp, filepath.Join(k.dir, storeFile))
	if errors.Is(err, fs.ErrExist) {
		return k.readStoreID() // another keeper made it first
	}
	if err != nil {
		return fail(err)
	}
	if err := syncDir(k.dir); err != nil {
		return fail(err)
	}
	return s, nil
}
