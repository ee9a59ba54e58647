package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

func pointKey(module, local string, form int, fingerprint string) string {
	return fmt.Sprintf("point.%s.%s.%d.%s", module, local, form, fingerprint)
}

func pointName(p *Point) string {
	return fmt.Sprintf("%s/%s f%d-%s", p.Module, p.Local, p.Form, p.Fingerprint)
}

// SnapshotKept takes the restore point of one kept data: positions first,
// then each stream's snapshot into a .partial directory, synced and renamed
// into place whole, then recorded in the index and as an act.
func (k *Keeper) SnapshotKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbSnapshot, r); err != nil {
		return nil, err
	}
	ctx, release, err := k.lock(ctx, VerbSnapshot, r)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := k.unfinished(ctx, VerbSnapshot, r.Module, r.Local); err != nil {
		return nil, err
	}

	what := fmt.Sprintf("%s/%s f%d-%s", r.Module, r.Local, r.Form, r.Fingerprint)
	fail := func(err error) (*Reply, error) {
		err = fmt.Errorf("restore point %s was not taken: %w", what, err)
		k.record(ctx, Act{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Caller: r.Caller, Why: r.Why,
			What: err.Error(), Outcome: "failed"})
		return nil, err
	}

	live, looked, err := k.liveStreams(ctx, r.Module, r.Local)
	if err != nil {
		return fail(err)
	}
	if len(live) == 0 {
		return fail(errorf(ErrNotFound, "no kept data %s/%s on the bus (looked for %s)", r.Module, r.Local,
			strings.Join(looked, ", ")))
	}
	// Positions first: a consumer that moves during the snapshot is then a
	// little behind, so after a restore it hears a message twice and never
	// misses one.
	positions, err := k.positions(ctx, r.Module, r.Local)
	if err != nil {
		return fail(withKind(ErrFailed, err))
	}

	rel := pointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	partialRel := rel + partialSuffix
	if err := k.mkdirs(filepath.Dir(rel)); err != nil {
		return fail(withKind(ErrFailed, err))
	}
	partial := k.abs(partialRel)
	if err := os.RemoveAll(partial); err != nil {
		return fail(errorf(ErrFailed, "removing an earlier partial point: %v", err))
	}
	if err := os.Mkdir(partial, 0o700); err != nil {
		return fail(withKind(ErrFailed, err))
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(partial)
		}
	}()

	m, size, err := k.writeArchive(ctx, partial, streamNames(live),
		Progress{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Step: "snapshot"})
	if err != nil {
		return fail(withKind(ErrFailed, err))
	}
	point := &Point{
		Module: r.Module, Local: r.Local, Form: r.Form, Fingerprint: r.Fingerprint, CatchUp: r.CatchUp,
		Taken: k.now().UTC(), Caller: r.Caller, Why: r.Why, Dir: rel,
		Streams: streamSums(m), Positions: positions, ArchiveSize: size,
	}
	if point.Positions == nil {
		point.Positions = []Position{}
	}
	if err := writeJSONDurable(filepath.Join(partial, pointFile), point); err != nil {
		return fail(errorf(ErrFailed, "writing point.json: %v", err))
	}
	if err := syncDir(partial); err != nil {
		return fail(withKind(ErrFailed, err))
	}
	replaced, err := k.placeWhole(partial, k.abs(rel))
	if err != nil {
		return fail(errorf(ErrFailed, "putting the point in place: %v", err))
	}
	committed = true

	data, _ := json.Marshal(point)
	if err := k.index.Put(ctx, pointKey(r.Module, r.Local, r.Form, r.Fingerprint), data); err != nil {
		return nil, errorf(ErrFailed, "restore point %s is complete in %s, but it could not be recorded in the index (%v); "+
			"a keeper restart rebuilds the index from the files", what, k.abs(rel), err)
	}
	said := fmt.Sprintf("Took restore point %s: %d stream(s), %d message(s), %d consumer position(s), %s, in %s.",
		what, len(point.Streams), totalMessages(point.Streams), len(positions), HumanBytes(size), k.abs(rel))
	if replaced {
		said += " It replaces the earlier point of the same form and fingerprint."
	}
	k.record(ctx, Act{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Caller: r.Caller, Why: r.Why,
		What: said, Outcome: "done"})
	return &Reply{Said: said, Point: point, Dir: k.abs(rel), CatchUp: r.CatchUp, Positions: positions}, nil
}

// placeWhole renames the complete directory src to dst. When dst exists, the
// two are exchanged atomically and the old one, now at src, is removed.
func (k *Keeper) placeWhole(src, dst string) (replaced bool, err error) {
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(src, dst); err != nil {
			return false, err
		}
		return false, syncDir(filepath.Dir(dst))
	} else if err != nil {
		return false, err
	}
	if err := exchange(src, dst); err != nil {
		return false, err
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return true, err
	}
	// src now holds the old point under a .partial name: removed now, or at
	// the next start.
	if err := os.RemoveAll(src); err != nil {
		k.log.Warn("could not remove the replaced point", "dir", src, "err", err)
	}
	return true, nil
}

func streamSums(m *busarchive.Manifest) []StreamSum {
	out := make([]StreamSum, 0, len(m.Streams))
	for _, s := range m.Streams {
		out = append(out, StreamSum{Name: s.Name, Messages: s.State.Msgs, Bytes: s.State.Bytes,
			FirstSeq: s.State.FirstSeq, LastSeq: s.State.LastSeq, Consumers: s.State.Consumers})
	}
	return out
}

func totalMessages(ss []StreamSum) uint64 {
	var n uint64
	for _, s := range ss {
		n += s.Messages
	}
	return n
}

// HumanBytes writes a byte count as people read it: 512 B, 1.5 KiB, 2.0 GiB.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
