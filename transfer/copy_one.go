package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper/archives"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// aCopy is one point or aside being copied: its archive and key indexes
// are read at src in from and written at rel in to, and its record rec
// (raw, the bytes written) is written there last. src is rel but for an
// incremental point, whose archive is its moment's point's
// (copy_incremental.go).
type aCopy struct {
	from, to store.Store
	src, rel string
	raw      []byte
	rec      *kept.Point
	// compose, set for an incremental point whose moment's point is not
	// made, composes its archive as it is written (copyComposed).
	compose Composer
}

// copyOne copies one point or aside; false means it was there, equal.
// sealed says its archive is encrypted, so it was copied as ciphertext and
// checked by its checksum only.
func copyOne(ctx context.Context, from, to store.Store, rel string, compose Composer) (copied, sealed bool, err error) {
	raw, rec, err := layout.ReadRecord(ctx, from, rel)
	if err != nil {
		return false, false, fmt.Errorf("its record does not read: %w", err)
	}
	c := &aCopy{from: from, to: to, src: rel, rel: rel, raw: raw, rec: rec}
	if rec.Incremental {
		if c, err = incrementalCopy(ctx, from, to, rel, rec, compose); err != nil {
			return false, false, err
		}
	}
	if c.compose != nil {
		copied, err := c.copyComposed(ctx)
		return copied, false, err
	}
	if err := layout.CheckSealing(c.rec.Sealing); err != nil {
		return false, false, err
	}
	sealed = c.rec.Encrypted != nil
	equal, err := c.equal(ctx)
	if err != nil || equal {
		return false, sealed, err
	}
	sum, err := c.copyArchive(ctx)
	if err != nil {
		return false, sealed, err
	}
	if err := copyKeyIndexes(ctx, from, to, c.src, c.rel, c.rec); err != nil {
		return false, sealed, err
	}
	if err := copyEvidence(ctx, from, to, rel); err != nil {
		return false, sealed, err
	}
	err = c.commit(ctx, sum)
	return err == nil, sealed, err
}

// equal reports whether the target holds the copy already (an equal
// record, an archive of the same size and checksum), and then brings what
// may have been written beside it since: a restore's evidence, and key
// indexes a keeper before them left out.
func (c *aCopy) equal(ctx context.Context) (bool, error) {
	src, err := c.from.Stat(ctx, layout.ArchiveKeyOf(c.src, c.rec))
	if err != nil {
		return false, fmt.Errorf("its archive: %w", err)
	}
	_, trec, err := layout.ReadRecord(ctx, c.to, c.rel)
	if err != nil || !sameRecord(c.rec, trec) {
		return false, nil
	}
	dst, err := c.to.Stat(ctx, layout.ArchiveKeyOf(c.rel, c.rec))
	if err != nil || dst.Size != src.Size || (trec.ArchiveSum != "" && dst.Sum != "" && dst.Sum != trec.ArchiveSum) {
		return false, nil
	}
	if err := copyKeyIndexes(ctx, c.from, c.to, c.src, c.rel, c.rec); err != nil {
		return false, err
	}
	return true, copyEvidence(ctx, c.from, c.to, c.rel)
}

// copyArchive copies the archive and checks the copy: its checksum against
// the record's, and, when it is not encrypted, its contents whole (every
// entry's size and SHA-256, every stream archive decoded, the streams the
// record names). It returns the copy's checksum.
func (c *aCopy) copyArchive(ctx context.Context) (string, error) {
	sealed := c.rec.Encrypted != nil
	if sealed && c.rec.ArchiveSum == "" {
		return "", fmt.Errorf("its archive is encrypted and its record names no checksum, so the copy could not be checked without the key and was not made")
	}
	key := layout.ArchiveKeyOf(c.rel, c.rec)
	info, err := store.CopyObject(ctx, c.from, layout.ArchiveKeyOf(c.src, c.rec), c.to, key)
	if err != nil {
		return "", err
	}
	if c.rec.ArchiveSum != "" && info.Sum != c.rec.ArchiveSum {
		return "", fmt.Errorf("the copy's checksum %s differs from its record's %s", info.Sum, c.rec.ArchiveSum)
	}
	if sealed {
		// Its ciphertext was checked whole above; its contents are not
		// decrypted here (copy needs no key).
		return info.Sum, nil
	}
	return info.Sum, c.verifyCopy(ctx, key)
}

// verifyCopy verifies the plain archive at key in the target whole (every
// entry's size and SHA-256, every stream archive decoded) and holds its
// streams to those its record names.
func (c *aCopy) verifyCopy(ctx context.Context, key string) error {
	a, err := archives.Open(ctx, c.to, c.rel, c.rec, c.to.Describe().URL+"/"+key, nil)
	if err != nil {
		return fmt.Errorf("the copy does not open: %w", err)
	}
	m, _, err := archives.Verify(ctx, a)
	a.Close()
	if err != nil {
		return fmt.Errorf("the copy does not verify: %w", err)
	}
	if got, want := m.StreamNames(), kept.StreamSumNames(c.rec.Streams); strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("its record names streams %v but its archive holds %v", want, got)
	}
	return nil
}

// commit writes the record in the target, the copy's commit mark; one
// taken before stores named checksums is given the copy's, sum.
func (c *aCopy) commit(ctx context.Context, sum string) error {
	raw := c.raw
	if c.rec.ArchiveSum == "" {
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err == nil {
			v["archive-sum"] = sum
			if kept.WriteOldKeys { // both keys, as the keeper writes them (kept/wirecase.go)
				v["archive_sum"] = sum
			}
			if b, err := layout.RecordJSON(v); err == nil {
				raw = b
			}
		}
	}
	w, err := c.to.Create(ctx, layout.RecordKey(c.rel))
	if err != nil {
		return err
	}
	defer w.Abort()
	if _, err := w.Write(raw); err != nil {
		return err
	}
	_, err = w.Commit(ctx)
	return err
}
