package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// CopyReport says what CopyStores did with each point and aside.
type CopyReport struct {
	Copied  []string `json:"copied"`  // key prefixes copied and verified
	Skipped []string `json:"skipped"` // already in the target, equal
	Failed  []string `json:"failed"`  // with why, one sentence each
	// Encrypted are the ones of Copied whose archive is encrypted: copied
	// as it is stored, ciphertext, and checked against its record's
	// checksum; their contents were not decrypted (no key is needed, nor
	// used).
	Encrypted []string `json:"encrypted,omitempty"`
}

// CopyStores copies the committed points and asides of from into to (of one
// module, or one kept data, when module and local are given). Each is
// copied archive first, then verified whole in the target (every entry's
// size and SHA-256, every stream archive decoded, the streams its record
// names), its key indexes copied beside it (each checked against the
// checksum its record names), and only then given its record there, the
// commit mark, last. One already in the target with an equal record and an
// archive of the same size and checksum is skipped (its key indexes copied
// where they are missing). A failure leaves that one invisible in the target
// (its leftover archive is swept by the target's next keeper) and the
// others go on. Neither store's index is touched: a keeper rebuilds its
// index from its store when it starts. An encrypted archive (bus.tar.age)
// is copied as it is stored, its ciphertext checked against the checksum
// its record names; it is not decrypted, so no key is needed, and its
// contents are verified only by a keeper with the identity (verify-kept).
// An incremental point is copied as a full point, the archive of the point
// of its moment under its own record (copy_incremental.go); before that
// point is made, its archive is composed into the target by compose (nil:
// it fails, naming that point).
func CopyStores(ctx context.Context, from, to store.Store, module, local string, log *slog.Logger, compose Composer) (*CopyReport, error) {
	if log == nil {
		log = slog.Default()
	}
	if module != "" {
		if err := kept.ValidName("module", module); err != nil {
			return nil, err
		}
	}
	if local != "" {
		if err := kept.CheckKept(module, local); err != nil {
			return nil, err
		}
	}
	rels, err := recordPrefixes(ctx, from)
	if err != nil {
		return nil, err
	}
	rep := &CopyReport{Copied: []string{}, Skipped: []string{}, Failed: []string{}}
	for _, rel := range rels {
		m, l := layout.KeptOf(rel)
		if (module != "" && m != module) || (local != "" && l != local) {
			continue
		}
		copied, sealed, err := copyOne(ctx, from, to, rel, compose)
		switch {
		case err != nil:
			log.Error("not copied", "what", rel, "err", err)
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", rel, err))
		case copied && sealed:
			log.Info("copied as it is stored, encrypted; its ciphertext's checksum matches its record", "what", rel)
			rep.Copied = append(rep.Copied, rel)
			rep.Encrypted = append(rep.Encrypted, rel)
		case copied:
			log.Info("copied and verified", "what", rel)
			rep.Copied = append(rep.Copied, rel)
		default:
			rep.Skipped = append(rep.Skipped, rel)
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	if len(rep.Failed) > 0 {
		return rep, kept.Errorf(kept.ErrFailed, "%d of %d point(s) and aside(s) were not copied: %s", len(rep.Failed),
			len(rep.Failed)+len(rep.Copied)+len(rep.Skipped), strings.Join(rep.Failed, "; "))
	}
	return rep, nil
}

// recordPrefixes lists the prefixes of every committed point and aside.
func recordPrefixes(ctx context.Context, st store.Store) ([]string, error) {
	var out []string
	for _, top := range []string{layout.PointsDir, layout.AsideDir} {
		objs, err := st.List(ctx, top+"/")
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", top, st.Describe().URL, err)
		}
		for _, o := range objs {
			rel := path.Dir(o.Key)
			if layout.IsRecordPlace(rel) && o.Key == layout.RecordKey(rel) {
				out = append(out, rel)
			}
		}
	}
	return out, nil
}

// copyEvidence copies the evidence report of the restores beside rel
// (evidence.json and summary.md), where there is one, before the record
// that makes the copy visible; it streams, so its size needs no bound.
func copyEvidence(ctx context.Context, from, to store.Store, rel string) error {
	for _, name := range []string{kept.EvidenceFile, kept.SummaryFile} {
		key := rel + "/" + name
		info, err := from.Stat(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("its evidence report %s: %w", name, err)
		}
		if there, err := to.Stat(ctx, key); err == nil && there.Size == info.Size && there.Sum != "" && there.Sum == info.Sum {
			continue // copied before
		}
		copied, err := store.CopyObject(ctx, from, key, to, key)
		if err == nil && info.Sum != "" && copied.Sum != "" && copied.Sum != info.Sum {
			err = fmt.Errorf("the copy's checksum %s differs from the original's %s", copied.Sum, info.Sum)
		}
		if err != nil {
			return fmt.Errorf("copying its evidence report %s: %w", name, err)
		}
	}
	return nil
}

// sameRecord reports whether the target's record t is the copy of s (which
// may lack the checksum the copy's record names).
func sameRecord(s, t *kept.Point) bool {
	return s.Taken.Equal(t.Taken) && s.ArchiveSize == t.ArchiveSize && (s.ArchiveSum == "" || s.ArchiveSum == t.ArchiveSum) &&
		strings.Join(kept.StreamSumNames(s.Streams), ",") == strings.Join(kept.StreamSumNames(t.Streams), ",")
}
