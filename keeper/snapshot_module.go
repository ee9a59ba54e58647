package keeper

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// snapshot-kept with local "*" takes every kept data of the module at one
// cut, all at the same moment, each stream of each holding exactly the
// messages its leader stamped at or before it: an incremental point of
// each captured one whose capture reaches the cut, a full point cut at it
// (snapshot_cut.go) of every other. restore-kept with local "*" and at
// restores each captured kept data to that moment, one after the other; a
// kept data of the module that is not captured cannot be restored to a
// moment: that request is refused naming it, and nothing is restored.

// allLocals is kept.AllLocals.
const allLocals = kept.AllLocals

// cutKey carries the moment of a cut to snapshotIncremental.
type cutKey struct{}

// cutOf is the moment of the cut ctx carries, and whether it carries one.
func cutOf(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(cutKey{}).(time.Time)
	return at, ok
}

// snapshotModule is snapshot-kept of every kept data of r.Module at one
// cut.
func (k *Keeper) snapshotModule(ctx context.Context, r Request) (*Reply, error) {
	on, off, err := k.moduleLocals(ctx, r.Module)
	if err != nil {
		return nil, err
	}
	locals := slices.Sorted(slices.Values(append(on, off...)))
	if len(locals) == 0 {
		return nil, Errorf(ErrNotFound, "module %s has no kept data with a point, a plan or a capture, so nothing was done", r.Module)
	}
	at := k.now().UTC()
	ctx = context.WithValue(ctx, cutKey{}, at)
	rep := &Reply{}
	var said []string
	for _, local := range locals {
		rr := r
		rr.Local = local
		one, err := k.SnapshotKept(ctx, rr)
		if err != nil {
			taken := "no point was taken"
			if len(rep.Points) > 0 {
				taken = fmt.Sprintf("the points of %s were taken at the cut and stay", strings.Join(said, ", "))
			}
			return nil, fmt.Errorf("%s of %s at one cut: %w; %s", VerbSnapshot, r.Module, err, taken)
		}
		rep.Points = append(rep.Points, *one.Point)
		said = append(said, r.Module+"/"+local)
	}
	incremental := 0
	for _, p := range rep.Points {
		if p.Incremental {
			incremental++
		}
	}
	rep.Said = fmt.Sprintf("Took %d point(s) of %s at one cut, %s: %s; %d incremental (its base and the capture's segments), %d full, cut at it.",
		len(rep.Points), r.Module, at.Format(time.RFC3339Nano), strings.Join(said, ", "), incremental, len(rep.Points)-incremental)
	k.record(ctx, Act{Verb: VerbSnapshot, Module: r.Module, Local: kept.AllLocals, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why,
		What: rep.Said, Outcome: "done"})
	return rep, nil
}

// restoreModuleAt is restore-kept of every captured kept data of r.Module
// to the moment r.At, one after the other.
func (k *Keeper) restoreModuleAt(ctx context.Context, r Request) (*Reply, error) {
	locals, err := k.capturedLocals(ctx, r.Module)
	if err != nil {
		return nil, err
	}
	rep := &Reply{}
	var said, done []string
	for _, local := range locals {
		rr := r
		rr.Local = local
		one, err := k.restoreAt(ctx, rr)
		if err != nil {
			restored := "none was restored"
			if len(done) > 0 {
				restored = strings.Join(done, ", ") + " were restored to the moment"
			}
			rest := slices.Clone(locals[len(done)+1:])
			if len(rest) > 0 {
				restored += "; " + r.Module + "/{" + strings.Join(rest, ",") + "} were not touched"
			}
			return nil, fmt.Errorf("%s of %s at %s: %s/%s: %w; %s", VerbRestore, r.Module, r.At, r.Module, local, err, restored)
		}
		if one.Point != nil {
			rep.Points = append(rep.Points, *one.Point)
		}
		said = append(said, one.Said)
		done = append(done, r.Module+"/"+local)
	}
	rep.Said = fmt.Sprintf("Restored %d kept data of %s to %s, one after the other: %s", len(done), r.Module, r.At, strings.Join(said, " "))
	return rep, nil
}

// capturedLocals are the kept data of module whose capture is on, sorted;
// a kept data of the module with a point or a plan but no capture refuses
// the cut.
func (k *Keeper) capturedLocals(ctx context.Context, module string) ([]string, error) {
	on, off, err := k.moduleLocals(ctx, module)
	if err != nil {
		return nil, err
	}
	switch {
	case len(off) > 0:
		return nil, Errorf(ErrConflict, "%s/{%s} of module %s are not captured, so they cannot be restored to a moment with the others (capture-kept turns capture on), and nothing was done",
			module, strings.Join(off, ","), module)
	case len(on) == 0:
		return nil, Errorf(ErrNotFound, "no kept data of module %s is captured (capture-kept turns capture on), so nothing was done", module)
	}
	return on, nil
}

// moduleLocals are the kept data of module whose capture is on, and those
// with a point or a plan but no capture, each sorted.
func (k *Keeper) moduleLocals(ctx context.Context, module string) (on, off []string, err error) {
	recs, err := k.Captures(ctx, module, "")
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range recs {
		if rec.On {
			on = append(on, rec.Local)
		}
	}
	keys, err := k.index.KeysUnder(ctx, []string{"point." + module + ".", "plan." + module + "."})
	if err != nil {
		return nil, nil, err
	}
	for _, key := range keys {
		parts := strings.Split(key, ".")
		if len(parts) < 3 || slices.Contains(on, parts[2]) || slices.Contains(off, parts[2]) {
			continue
		}
		off = append(off, parts[2])
	}
	slices.Sort(on)
	slices.Sort(off)
	return on, off, nil
}
