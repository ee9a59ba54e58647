package keeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
)

// storeFile is the store's identity object; the index's "store" record
// names the store it belongs to.
const (
	storeFile = "store.json"
	storeKey  = "store"
)

// storeID is store.json: the identity of a store, made once.
type storeID struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

// storeRecord is the index's record of the store it belongs to.
type storeRecord struct {
	ID    string    `json:"id"`
	URL   string    `json:"url,omitempty"` // the store as the keeper that claimed it named it
	Dir   string    `json:"dir,omitempty"` // the directory, in records made before stores
	Host  string    `json:"host"`          // where that keeper ran
	Since time.Time `json:"since"`
}

func (r storeRecord) where() string {
	if r.URL != "" {
		return r.URL
	}
	return r.Dir
}

// ErrOtherStore is wrapped by the error of New when the index belongs to
// another store.
var ErrOtherStore = errors.New("the index belongs to another store")

// claimStore ties the index to this keeper's store, or refuses: a keeper
// whose store is not the one the index belongs to would rebuild the index
// from objects that are not its records and remove them. The first keeper
// on an index records its store's id (made on first use); one with another
// store, or with an empty one where the index already holds records, is
// refused with a sentence naming both. Two keepers making the id of one new
// store at once agree on the one the index took.
func (k *Keeper) claimStore(ctx context.Context) error {
	here := k.store.Describe().URL
	local, err := k.readStoreID(ctx)
	if err != nil {
		return err
	}
	data, err := k.index.Get(ctx, storeKey)
	fresh := false
	switch {
	case errors.Is(err, ErrNotFound):
		if local == nil {
			if err := k.foreignRecords(ctx); err != nil {
				return err
			}
			if local, err = k.makeStoreID(ctx); err != nil {
				return err
			}
			fresh = true
		}
		host, _ := os.Hostname()
		rec, _ := json.Marshal(storeRecord{ID: local.ID, URL: here, Host: host, Since: k.now().UTC()})
		if _, err := k.index.Create(ctx, storeKey, rec); err == nil {
			k.log.Info("the index now belongs to this store", "store", here, "id", local.ID)
			return k.keepStoreID(ctx, local)
		} else if !errors.Is(err, ErrExists) {
			return fmt.Errorf("recording which store the index belongs to: %w", withKind(ErrNoBus, err))
		}
		// Another keeper claimed it meanwhile: compare with its record.
		if data, err = k.index.Get(ctx, storeKey); err != nil {
			return fmt.Errorf("reading which store the index belongs to: %w", withKind(ErrNoBus, err))
		}
	case err != nil:
		return fmt.Errorf("reading which store the index belongs to: %w", withKind(ErrNoBus, err))
	}
	var rec storeRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.ID == "" {
		return Errorf(ErrFailed, "the index's store record is not readable (%v), so this keeper cannot tell whether the index is its own; nothing was started", err)
	}
	if fresh && rec.URL == here {
		// Another keeper made this same new store's id first: take its.
		return k.keepStoreID(ctx, &storeID{ID: rec.ID, Created: rec.Since})
	}
	if local == nil && rec.URL == here {
		// Another keeper starting on this same new store at the same time
		// claimed the index between this one's two reads: its store.json
		// is there now, or soon.
		for try := 0; try < 20 && local == nil; try++ {
			time.Sleep(250 * time.Millisecond)
			if local, err = k.readStoreID(ctx); err != nil {
				return err
			}
		}
	}
	if local == nil {
		if moved, err := k.takeOverIndex(ctx, rec); moved || err != nil {
			return err
		}
	}
	if local == nil || local.ID != rec.ID {
		mine := "has no store id yet"
		if local != nil {
			mine = "is store " + local.ID
		}
		return asKind(ErrConflict, fmt.Errorf("%w: it belongs to %s on host %s (store %s, since %s), and this keeper's store %s %s; "+
			"run this keeper with that same store (shared by every keeper of the index), or give it an index and verbs of its own "+
			"with another --bucket and --prefix, so nothing was started and no record was changed",
			ErrOtherStore, rec.where(), rec.Host, rec.ID, rec.Since.Format(time.RFC3339), here, mine))
	}
	return nil
}

// takeOverIndex moves the index to this store, which has no id yet, when
// the store holds every point and aside the index records (as after a
// `nats-keeper copy` of all of them from the index's store): a rebuild then
// loses no record. The store gets an id of its own and the index's record
// names it, so the store the index belonged to is refused from then on. It
// returns false, and changes nothing, when any record is missing here.
//
// An index that records no point, no aside and no unfinished restore (a
// copy of an empty store) moves too, but only to a store of another URL
// than the one it belongs to: the same URL without its id is the same path
// on another host's disk, a second keeper that must share the first one's
// store, and is refused as before.
func (k *Keeper) takeOverIndex(ctx context.Context, rec storeRecord) (bool, error) {
	keys, err := k.indexKeys(ctx, "point.", "aside.")
	if err != nil {
		return false, err
	}
	if len(keys) == 0 {
		journals, err := k.indexKeys(ctx, "journal.")
		if err != nil || len(journals) > 0 || rec.URL == k.store.Describe().URL {
			return false, err
		}
	}
	for _, key := range keys {
		data, err := k.index.Get(ctx, key)
		if err != nil {
			return false, nil
		}
		var r struct {
			Dir string `json:"dir"`
		}
		if json.Unmarshal(data, &r) != nil || !isRecordPlace(r.Dir) || store.CheckKey(r.Dir) != nil {
			return false, nil
		}
		if there, _ := k.exists(ctx, recordKey(r.Dir)); !there {
			return false, nil
		}
	}
	data, rev, err := k.index.GetRev(ctx, storeKey)
	if err != nil {
		return false, fmt.Errorf("reading which store the index belongs to: %w", withKind(ErrNoBus, err))
	}
	var now storeRecord
	if json.Unmarshal(data, &now) != nil || now.ID != rec.ID {
		return false, Errorf(ErrConflict, "the index's store record changed while this keeper read it, so nothing was started; start it again")
	}
	id, err := k.makeStoreID(ctx)
	if err != nil {
		return false, err
	}
	host, _ := os.Hostname()
	here := k.store.Describe().URL
	next, _ := json.Marshal(storeRecord{ID: id.ID, URL: here, Host: host, Since: k.now().UTC()})
	if _, err := k.index.Update(ctx, storeKey, next, rev); err != nil {
		return false, fmt.Errorf("moving the index to this store: %w, so nothing was started", withKind(ErrNoBus, err))
	}
	k.log.Warn("the index moved to this store, which holds every point and aside it records; the store it belonged to is refused from now on",
		"store", here, "from", rec.where(), "records", len(keys))
	what := fmt.Sprintf("The index moved from store %s to %s, which holds all %d of its point and aside records.", rec.where(), here, len(keys))
	if len(keys) == 0 {
		what = fmt.Sprintf("The index, which records no point and no aside, moved from store %s to %s.", rec.where(), here)
	}
	k.record(ctx, Act{Verb: "store", What: what, Outcome: "done"})
	return true, nil
}

// indexKeys lists the index's keys under each of prefixes.
func (k *Keeper) indexKeys(ctx context.Context, prefixes ...string) ([]string, error) {
	var keys []string
	for _, prefix := range prefixes {
		ks, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("listing the index: %w", withKind(ErrNoBus, err))
		}
		keys = append(keys, ks...)
	}
	return keys, nil
}

// keepStoreID makes sure store.json holds id, the one the index names.
func (k *Keeper) keepStoreID(ctx context.Context, id *storeID) error {
	now, err := k.readStoreID(ctx)
	if err == nil && now != nil && now.ID == id.ID {
		return nil
	}
	if _, err := k.putJSON(ctx, storeFile, id); err != nil {
		// Two keepers writing the id the index took at once is no failure.
		if now, rerr := k.readStoreID(ctx); rerr == nil && now != nil && now.ID == id.ID {
			return nil
		}
		return Errorf(ErrFailed, "writing the store's %s: %v, so nothing was started", storeFile, err)
	}
	return nil
}

// foreignRecords refuses to claim an index that holds point or aside
// records of which this store holds none: they are another store's.
func (k *Keeper) foreignRecords(ctx context.Context) error {
	keys, err := k.indexKeys(ctx, "point.", "aside.")
	if err != nil {
		return err
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
		if json.Unmarshal(data, &rec) == nil && isRecordPlace(rec.Dir) && store.CheckKey(rec.Dir) == nil {
			if there, _ := k.exists(ctx, recordKey(rec.Dir)); there {
				return nil // this store holds records of the index: it is the index's
			}
		}
	}
	return asKind(ErrConflict, fmt.Errorf("%w: the index holds %d point and aside record(s) and this keeper's store %s holds none of them; "+
		"run this keeper with the store those records are in, or give it an index and verbs of its own with another --bucket and --prefix, "+
		"so nothing was started and no record was changed", ErrOtherStore, len(keys), k.store.Describe().URL))
}

func (k *Keeper) readStoreID(ctx context.Context) (*storeID, error) {
	var s storeID
	err := k.getJSON(ctx, storeFile, &s)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil || s.ID == "" {
		return nil, Errorf(ErrFailed, "the store's %s is not readable (%v), so nothing was started", storeFile, err)
	}
	return &s, nil
}

// makeStoreID makes a new id and writes it as the store's store.json.
func (k *Keeper) makeStoreID(ctx context.Context) (*storeID, error) {
	var b [16]byte
	rand.Read(b[:])
	s := &storeID{ID: hex.EncodeToString(b[:]), Created: k.now().UTC()}
	if _, err := k.putJSON(ctx, storeFile, s); err != nil {
		// Another keeper starting on the same new store at the same time
		// may have written its id over this one (a store without
		// create-if-absent, as S3): take what the store holds now; the
		// index's record then decides between the two (claimStore).
		if now, rerr := k.readStoreID(ctx); rerr == nil && now != nil {
			k.log.Info("another keeper wrote the new store's id at the same time; taking the store's", "id", now.ID)
			return now, nil
		}
		return nil, Errorf(ErrFailed, "writing the store's %s: %v, so nothing was started", storeFile, err)
	}
	return s, nil
}
