package keeper

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// A logical restore (method "logical", changes.md) reads, each file top to
// bottom:
//
//   - restore_logical.go: planLogical, what it would write, touching
//     nothing; refused for anything but KV buckets and object stores;
//   - restore_logical_keyindex.go: through the point's key index of the
//     stream, where it has one;
//   - restore_logical_diff.go: the keys that differ, found at the cost of
//     what changed (the live tail after the point, the point's keys no
//     longer live), the values compared, and each stream's change;
//   - restore_logical_run.go: restoreLogical, the order of its steps (or
//     its dry run);
//   - restore_logical_aside.go: the live values it overwrites, set aside;
//   - restore_logical_begin.go: its journal written first;
//   - restore_logical_exec.go: the run: the keys written, then the
//     positions on other streams;
//   - restore_logical_write.go: a key's value written as a new revision;
//   - restore_logical_check.go: the evidence, every key read back;
//   - restore_logical_reply.go: the reply;
//   - restore_logical_recover.go: a run a stopped keeper left, finished.
//
// For each key (object) whose live value differs from the point's, the
// point's value is published as a new revision on the key's subject, a
// delete marker where the point had none. Nothing is removed; watchers and
// the module's consumers on the bucket see the new revisions as new
// messages; revisions and times are new, not the point's.

// logicalPlan is what a logical restore writes, per stream of the point.
type logicalPlan struct {
	streams []*logicalStream
	// fromAside: what it restores from is a logical aside, whose keys are
	// the only ones in scope (a put back).
	fromAside bool
}

// logicalStream is one KV bucket or object store of a logical restore.
type logicalStream struct {
	name   string
	object bool   // an object store (else a KV bucket)
	bucket string // the bucket's name
	// liveLast is the live stream's last sequence when it was planned: the
	// aside holds what the stream held up to it.
	liveLast   uint64
	liveConfig json.RawMessage // its configuration as the server holds it
	// keys are the keys that differ, sorted by subject; total how many keys
	// were in scope (the point's, and those the live added).
	keys  []logicalKey
	total int
	// chunks are the chunk messages of the objects that differ, by chunk
	// subject: the source's (to write) and the live ones (to set aside).
	chunks, liveChunks map[string][]busarchive.ArchivedMessage
}

// logicalKey is one key (object) that differs: the source's last message
// for it (nil: none, or one that says it is deleted) and the live one (nil:
// no live message).
type logicalKey struct {
	subject string
	want    *busarchive.ArchivedMessage
	live    *busarchive.ArchivedMessage
}

// maxLogicalHeld bounds the bytes a logical restore holds in memory at once:
// the differing keys' values, the point's and the live ones.
const maxLogicalHeld = 256 << 20

// maxLogicalNames bounds the key names a plan's changes name per stream.
const maxLogicalNames = 64

// planLogical plans a logical restore: each stream of what it restores from
// must be a live KV bucket or object store (a kept data holding anything
// else is refused, before anything changes, with the reason), and the keys
// that differ are found and set on the plan, with the method and why of
// each stream in its changes.
func (k *Keeper) planLogical(ctx context.Context, r Request, pl *restorePlan) error {
	if pl.point == nil || pl.arch == nil {
		return Errorf(ErrBadRequest, "method logical writes a point's values into the live data; an aside-only request restores nothing")
	}
	if err := logicalApplies(pl); err != nil {
		return err
	}
	lp := &logicalPlan{fromAside: logicalSource(pl.point)}
	held := 0
	for _, sm := range pl.manifest.Streams {
		var scope *logicalScope // a point: the keys that changed since it
		if lp.fromAside {
			scope = &logicalScope{keys: asideScope(pl.point, sm.Name), all: true}
		}
		ls, err := k.planLogicalStreamOf(ctx, pl.arch, &sm, scope, &held)
		if err != nil {
			return err
		}
		lp.streams = append(lp.streams, ls)
		pl.setChange(ls.change(&sm))
	}
	pl.logical = lp
	// A logical restore moves none of the consumers on the streams it
	// writes into (they read the new revisions as new messages; setting
	// them back would replay): only those on other streams are set back.
	pl.Moves, pl.expect = logicalMoves(pl)
	pl.Restore, pl.SetAside, pl.Remove = lp.written(), lp.written(), []string{}
	pl.AsideBytes = 0
	return nil
}

// logicalApplies refuses a logical restore of anything but live KV buckets
// and object stores, each in what it restores from and on the bus.
func logicalApplies(pl *restorePlan) error {
	for _, sm := range pl.manifest.Streams {
		if _, _, ok := logicalKind(sm.Name, sm.Config.Subjects); !ok {
			return Errorf(ErrConflict, "method logical applies to KV buckets (stream KV_<bucket>, subjects $KV.<bucket>.>) and object stores (OBJ_<bucket>); "+
				"stream %s of %s is neither, so nothing was changed; use method full or delta", sm.Name, pl.source())
		}
		if !containsStream(pl.live, sm.Name) {
			return Errorf(ErrConflict, "method logical writes into the live bucket, and stream %s is not on the bus, so nothing was changed; use method full", sm.Name)
		}
	}
	for _, s := range pl.live {
		if pl.manifest.Stream(s.Name) == nil {
			return Errorf(ErrConflict, "method logical writes only into the streams %s holds, and stream %s of the kept data is live but not in it, so nothing was changed; use method full",
				pl.source(), s.Name)
		}
	}
	return nil
}

// logicalKind tells a KV bucket (stream KV_<b> taking $KV.<b>.>) or an object
// store (OBJ_<b> taking $O.<b>.C.> and $O.<b>.M.>) by its name and subjects.
func logicalKind(stream string, subjects []string) (bucket string, object bool, ok bool) {
	if b, found := strings.CutPrefix(stream, "KV_"); found && b != "" {
		return b, false, contains(subjects, "$KV."+b+".>")
	}
	if b, found := strings.CutPrefix(stream, "OBJ_"); found && b != "" {
		return b, true, contains(subjects, "$O."+b+".C.>") && contains(subjects, "$O."+b+".M.>")
	}
	return "", false, false
}

// logicalSource reports whether p is a logical aside: one whose streams
// hold only the values a logical restore overwrote. It puts back only
// logically.
func logicalSource(p *Point) bool {
	if p == nil {
		return false
	}
	for _, s := range p.Streams {
		if s.Logical {
			return true
		}
	}
	return false
}

// asideScope is the keys a logical aside names absent for stream: with
// those its archive holds, the keys it puts back.
func asideScope(p *Point, stream string) []string {
	for _, s := range p.Streams {
		if s.Name == stream {
			return append([]string{}, s.Absent...)
		}
	}
	return []string{}
}

// written is the streams where some key differs.
func (lp *logicalPlan) written() []string {
	out := []string{}
	for _, ls := range lp.streams {
		if len(ls.keys) > 0 {
			out = append(out, ls.name)
		}
	}
	return out
}

// keys is how many keys differ in all.
func (lp *logicalPlan) keyCount() int {
	n := 0
	for _, ls := range lp.streams {
		n += len(ls.keys)
	}
	return n
}

// logicalMoves is the plan's moves and expected consumers without those on
// the streams a logical restore writes into.
func logicalMoves(pl *restorePlan) ([]Move, []ConsumerFigures) {
	moves := []Move{}
	for _, m := range pl.Moves {
		if pl.manifest.Stream(m.Stream) == nil {
			moves = append(moves, m)
		}
	}
	var expect []ConsumerFigures
	for _, c := range pl.expect {
		if pl.manifest.Stream(c.Stream) == nil {
			expect = append(expect, c)
		}
	}
	return moves, expect
}

// setChange puts ch in the plan's changes, in place of the one of its
// stream if there is one.
func (pl *restorePlan) setChange(ch kept.StreamChange) {
	for i := range pl.changes {
		if pl.changes[i].Stream == ch.Stream {
			keep := pl.changes[i]
			keep.Kind, keep.Method, keep.Why, keep.Keys, keep.Objects = ch.Kind, ch.Method, ch.Why, ch.Keys, ch.Objects
			if keep.Now == nil {
				keep.Now = ch.Now
			}
			pl.changes[i] = keep
			return
		}
	}
	pl.changes = append(pl.changes, ch)
}

// sortKeys orders the keys by subject.
func sortKeys(keys []logicalKey) {
	sort.Slice(keys, func(i, j int) bool { return keys[i].subject < keys[j].subject })
}
