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
	streams, err := k.streamsOf(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("%s refused: %w, so nothing was done", VerbSnapshot, err)
	}
	ctx, release, err := k.lock(ctx, VerbSnapshot, r, streams...)
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
		Progress{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Step: "snapshot", BytesTotal: storedBytes(live)})
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
	replaced, err := k.placePoint(ctx, r, partial, rel)
	if err != nil {
		if replaced != nil {
			return fail(errorf(ErrFailed, "putting the point in place: %v; the earlier point is set aside whole as %s in %s", err, replaced.ID, k.abs(replaced.Dir)))
		}
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
	if replaced != nil {
		said += fmt.Sprintf(" It replaces the earlier point of the same form and fingerprint, which is set aside as %s in %s; only discard-aside removes it.",
			replaced.ID, k.abs(replaced.Dir))
	}
	k.record(ctx, Act{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Caller: r.Caller, Why: r.Why,
		What: said, Outcome: "done"})
	return &Reply{Said: said, Point: point, Aside: replaced, Dir: k.abs(rel), CatchUp: r.CatchUp, Positions: positions}, nil
}

// placePoint renames the complete point directory partial into rel. An
// earlier point there is never deleted: it becomes a set-aside copy (reason
// replaced). Its aside.json is written into it first, then it is renamed to
// aside/<id>, then the new point is renamed into place; so at every instant
// the earlier point is whole, as a point or as an aside, and the new one
// is whole under its .partial name or in place.
func (k *Keeper) placePoint(ctx context.Context, r Request, partial, rel string) (*Aside, error) {
	dst := k.abs(rel)
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(partial, dst); err != nil {
			return nil, err
		}
		return nil, syncDir(filepath.Dir(dst))
	} else if err != nil {
		return nil, err
	}
	a := &Aside{Module: r.Module, Local: r.Local, Taken: k.now().UTC(), Caller: r.Caller,
		Why:    "replaced by a new restore point of the same form and fingerprint",
		Reason: ReasonReplaced, Point: rel, Streams: []StreamSum{}, Positions: []Position{}}
	if old, err := k.loadSource(rel); err == nil {
		a.Streams, a.Positions, a.ArchiveSize = old.Streams, old.Positions, old.ArchiveSize
	} else {
		k.log.Warn("the replaced point's point.json is unreadable; it is set aside as it is", "dir", dst, "err", err)
	}
	id, claim, err := k.newAside(r.Module, r.Local)
	if err != nil {
		return nil, fmt.Errorf("setting the earlier point aside: %w", err)
	}
	defer os.Remove(claim) // the empty directory that claimed the id
	a.ID, a.Dir = id, asideRel(id)
	if err := writeJSONDurable(filepath.Join(dst, asideFile), a); err != nil {
		return nil, fmt.Errorf("setting the earlier point aside: writing its aside.json: %w", err)
	}
	if err := os.Rename(dst, k.abs(a.Dir)); err != nil {
		os.Remove(filepath.Join(dst, asideFile))
		return nil, fmt.Errorf("setting the earlier point aside: %w", err)
	}
	if err := syncDir(k.abs(asideDir)); err != nil {
		return a, err
	}
	if err := os.Rename(partial, dst); err != nil {
		return a, err
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return a, err
	}
	if err := k.recordAside(ctx, a); err != nil {
		k.log.Warn("the replaced point is set aside but not recorded in the index; a restart rebuilds it", "aside", id, "err", err)
	}
	return a, nil
}

func streamSums(m *busarchive.Manifest) []StreamSum {
	out := make([]StreamSum, 0, len(m.Streams))
	for _, s := range m.Streams {
		out = append(out, StreamSum{Name: s.Name, Messages: s.State.Msgs, Bytes: s.State.Bytes,
			FirstSeq: s.State.FirstSeq, LastSeq: s.State.LastSeq, Consumers: s.State.Consumers})
	}
	return out
}

// storedBytes is what the streams hold on the server: a snapshot's archive
// is about as big (less where the server compresses it).
func storedBytes(ss []StreamInfo) int64 {
	var n uint64
	for _, s := range ss {
		n += s.Bytes
	}
	return int64(n)
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
