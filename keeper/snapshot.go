package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

func pointName(p *Point) string {
	return fmt.Sprintf("%s/%s f%d-%s", p.Module, p.Local, p.Form, p.Fingerprint)
}

// SnapshotKept takes the restore point of one kept data: positions first,
// then each stream's snapshot into the point's archive in the store, then
// its point.json (the commit mark, last), then the index and the act.
func (k *Keeper) SnapshotKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbSnapshot, r); err != nil {
		return nil, err
	}
	if r.Local == kept.AllLocals {
		return k.snapshotModule(ctx, r)
	}
	streams, err := k.streamsOf(ctx, VerbSnapshot, r)
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
		k.record(ctx, Act{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why,
			What: err.Error(), Outcome: "failed"})
		return nil, err
	}

	live, looked, err := k.liveStreams(ctx, r.Module, r.Local)
	if err != nil {
		return fail(err)
	}
	if len(live) == 0 {
		return fail(Errorf(ErrNotFound, "no kept data %s/%s on the bus%s (looked for %s)", r.Module, r.Local,
			k.busDomain(), strings.Join(looked, ", ")))
	}
	if rep, err := k.snapshotIncremental(ctx, r, live); err != nil || rep != nil {
		if err != nil {
			return fail(err)
		}
		return rep, nil
	}
	// Positions first: a consumer on another stream that moves during the
	// snapshot is then a little behind, so after a restore it hears a
	// message twice and never misses one. Those on the kept streams come
	// with their snapshots (snapshot_positions.go).
	pb, err := k.readPositionsBefore(ctx, r.Module, r.Local, live)
	if err != nil {
		return fail(withKind(ErrFailed, err))
	}

	if err := k.checkRoom(ctx, storedBytes(live), k.spoolBound(live)); err != nil {
		return fail(err)
	}
	k.hook("snapshot:room-checked") // for tests: the disk may fill from here on
	rel := pointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	// An earlier point of the same form and fingerprint is made ready to
	// set aside while the snapshot runs; it is set aside only once the new
	// archive is whole (commitPoint).
	e := k.prepareReplace(ctx, r, rel)
	defer e.abandon(ctx)
	ki := newKeyIndexes(live, k.log)
	// The cut: the wall clock (k.now may be set back or ahead), which on
	// one server is the clock that stamps the messages (snapshot_cut.go).
	// A capture's base is not cut: its chain goes on after its last
	// sequence, so it holds every message up to it. Nor is a kept data of
	// one stream, outside a module's cut: it needs no cut to be one
	// moment, and a leader whose clock runs ahead of the keeper's would
	// stamp a message stored just before the request after it.
	var at time.Time
	if !captureBase(r) {
		if c, ok := cutOf(ctx); ok { // a module's cut (snapshot_module.go)
			at = c
		} else if len(live) > 1 {
			at = time.Now().UTC()
		}
		k.hook("snapshot:cut") // for tests: what is stored from here on is after the cut
	}
	m, w, err := k.snapshotArchive(ctx, rel, streamNames(live), at, pb, ki,
		Progress{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Step: "snapshot", BytesTotal: storedBytes(live)})
	if err != nil {
		return fail(withKind(ErrFailed, fmt.Errorf("%w, so no point was written", err)))
	}
	defer w.Abort()
	positions, err := pb.positions(ctx, k)
	if err != nil {
		return fail(withKind(ErrFailed, fmt.Errorf("%w, so no point was written", err)))
	}
	if err := checkPositionsFit(positions, pointFile); err != nil {
		return fail(fmt.Errorf("%w, so no point was made", err))
	}
	return k.commitPoint(ctx, VerbSnapshot, r, rel, m, w, ki, positions, e, fail, func(p *Point) string {
		cut := ""
		if p.At != nil {
			cut = " at the cut " + p.At.Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("Took restore point %s%s: %d stream(s), %d message(s), %d consumer position(s), %s, in %s.",
			what, cut, len(p.Streams), totalMessages(p.Streams), len(positions), HumanBytes(p.ArchiveSize), k.abs(rel))
	}, func(p *Point) {
		if !at.IsZero() {
			p.At = &at
		}
	})
}

// pointRecord is the record of the point r names at rel, its archive's
// manifest m, with positions: what commitPoint commits, and what a
// composed moment's archive is described by (composeMoment).
func (k *Keeper) pointRecord(r Request, rel string, m *busarchive.Manifest, positions []Position) *Point {
	return &Point{
		Module: r.Module, Local: r.Local, Form: r.Form, Fingerprint: r.Fingerprint, CatchUp: r.CatchUp,
		Taken: k.now().UTC(), Caller: r.Caller, Why: r.Why, Dir: rel,
		Streams: streamSums(m), Positions: positions, PositionCount: len(positions),
		Format: RecordFormat, WrittenBy: k.version,
	}
}

// commitPoint commits the point whose archive w holds (written, not yet
// committed; the caller aborts it after) at rel, for verb: the earlier
// point of the same form and fingerprint, made ready to set aside by e
// (prepareReplace) while the archive was written, is set aside (replaced),
// the archive committed, then the key indexes ki built beside it (nil:
// none), then point.json, the commit mark, last; then the
// index record, the act and the reply, whose sentence gives what was done.
// fail records a failure's act and shapes its error. It is the one way a
// point is committed: snapshot-kept and import take it.
func (k *Keeper) commitPoint(ctx context.Context, verb string, r Request, rel string, m *busarchive.Manifest, w store.Writer, ki *keyIndexes,
	positions []Position, e *earlier, fail func(error) (*Reply, error), sentence func(*Point) string, marks ...func(*Point)) (*Reply, error) {
	what := fmt.Sprintf("%s/%s f%d-%s", r.Module, r.Local, r.Form, r.Fingerprint)
	point := k.pointRecord(r, rel, m, positions)
	for _, mark := range marks {
		mark(point)
	}
	if r.KeepFor > 0 {
		until := point.Taken.Add(time.Duration(r.KeepFor))
		point.KeepUntil = &until
	}
	encoded := layout.EncodeAhead(positions) // while the earlier point is set aside and the archive committed
	replaced, err := e.setAside(ctx)
	if err != nil {
		return fail(Errorf(ErrFailed, "setting the earlier point of the same form and fingerprint aside: %v, so the new point was not written and the earlier one stays in place", err))
	}
	info, err := w.Commit(ctx)
	if err == nil {
		point.ArchiveSize, point.ArchiveSum, point.Sealing = info.Size, info.Sum, k.sealingOf(w)
		k.putKeyIndexes(ctx, rel, m, ki, point.Streams)
		var ps, data []byte
		if ps, err = encoded(); err == nil {
			data, err = pointJSON(point, ps)
		}
		if err == nil {
			_, err = k.putRecord(ctx, recordKey(rel), data) // the commit mark, last
		}
	}
	if err != nil && leaseLost(ctx) {
		// Another keeper may hold the kept data now and have committed its
		// own point at rel, with its record in the index: neither is this
		// verb's to remove.
		err = fmt.Errorf("%w, so this keeper's point was not committed; what it wrote in %s is left for the sweep of leftovers, "+
			"since another keeper may write there now", err, k.abs(rel))
		if replaced != nil {
			err = fmt.Errorf("%w; the earlier point is set aside whole as %s in %s", err, replaced.ID, k.abs(replaced.Dir))
		}
		return fail(Errorf(ErrFailed, "writing the point to the store: %w", err))
	}
	if err != nil {
		// Nothing under rel is a point now (the earlier one, if any, is set
		// aside whole): what this wrote there goes before the answer.
		err = k.dropUnplaced(ctx, rel, k.roomRefused(err, m.Bytes()))
		if replaced != nil {
			// The earlier point is an aside now: its record would name a
			// point that is no longer there.
			if derr := k.index.Delete(context.WithoutCancel(ctx), pointKey(r.Module, r.Local, r.Form, r.Fingerprint)); derr != nil {
				k.log.Warn("the replaced point's record stays in the index until the next rebuild", "point", what, "err", derr)
			}
			return fail(Errorf(ErrFailed, "writing the point to the store: %w, so no point is visible; the earlier point is set aside whole as %s in %s", err, replaced.ID, k.abs(replaced.Dir)))
		}
		return fail(Errorf(ErrFailed, "writing the point to the store: %w, so no point is visible", err))
	}

	if replaced != nil {
		// The earlier point's archive, set aside whole, may have the other
		// name (taken before with or without encryption): it must not stay.
		if err := k.dropOtherArchiveOf(ctx, rel, point); err != nil {
			k.log.Warn("the replaced point's archive stays beside the new one until the next start", "dir", k.abs(rel), "err", err)
		}
		if err := k.dropUnnamedKeyIndexes(ctx, rel, point); err != nil {
			k.log.Warn("a key index of the replaced point stays beside the new one, unnamed", "dir", k.abs(rel), "err", err)
		}
	}
	if err := k.index.Put(ctx, pointKey(r.Module, r.Local, r.Form, r.Fingerprint), pointRecord(point)); err != nil {
		return nil, Errorf(ErrFailed, "restore point %s is complete in %s, but it could not be recorded in the index (%v); "+
			"a keeper restart rebuilds the index from the files", what, k.abs(rel), err)
	}
	said := sentence(point)
	if replaced != nil {
		said += fmt.Sprintf(" It replaces the earlier point of the same form and fingerprint, which is set aside as %s in %s; only discard-aside removes it.",
			replaced.ID, k.abs(replaced.Dir))
	}
	rep := &Reply{Said: said, Point: point, Aside: replaced, Dir: k.abs(rel), CatchUp: r.CatchUp, Positions: positions}
	k.record(ctx, Act{Verb: verb, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why,
		What: said, Outcome: "done", Detail: pointDetail(rep)})
	k.hook(verb + ":recorded") // for tests: the act is recorded, the reply not yet sent
	k.observe.Snapshotted(r.Module, r.Local, point.ArchiveSize, point.Taken)
	return rep, nil
}

// pointDetail is the act's detail of a point taken: its reply without the
// positions (point.json holds them), which a client whose keeper died
// before it replied reads to know the point was taken (verbs' follow).
func pointDetail(rep *Reply) json.RawMessage {
	brief, p := *rep, *rep.Point
	p.Positions, brief.Point, brief.Positions = nil, &p, nil
	if brief.Aside != nil {
		a := *brief.Aside
		a.Positions, brief.Aside = nil, &a
	}
	data, err := json.Marshal(&brief)
	if err != nil || !detailFits(data, &brief) {
		return nil
	}
	return data
}

// maxDetail bounds an act's detail.
const maxDetail = 64 << 10

// detailFits reports whether data, the JSON of v for an act's detail, is
// under maxDetail as the release before wrote it: with the old keys only
// (kept.OldKeysOnly), so that the old keys written beside the new ones for
// one release cost no act the detail it had before.
func detailFits(data []byte, v any) bool {
	return len(data) < maxDetail || len(kept.OldKeysOnly(data, reflect.TypeOf(v))) < maxDetail
}

// copyObject copies one object within the store, without passing its bytes
// through the keeper where the store can (store.Copier).
func (k *Keeper) copyObject(ctx context.Context, src, dst string) (store.Info, error) {
	if c, ok := k.store.(store.Copier); ok {
		return c.Copy(ctx, src, dst)
	}
	return store.CopyObject(ctx, k.store, src, k.store, dst)
}

func streamSums(m *busarchive.Manifest) []StreamSum {
	out := make([]StreamSum, 0, len(m.Streams))
	for _, s := range m.Streams {
		st := s.Held() // a stream cut: what its archive holds
		out = append(out, StreamSum{Name: s.Name, Messages: st.Msgs, Bytes: st.Bytes,
			FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Consumers: st.Consumers})
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
