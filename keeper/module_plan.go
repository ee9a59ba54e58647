package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
)

// SetPlan records the plan of r.Module's kept data r.Local (set-plan): the
// streams it is made of, r.Streams, and the consumers that belong to it,
// r.Consumers. The plan replaces any recorded before, and wins over the
// naming rule from the next verb on. It takes the kept data's lease, as the
// verbs that change it do, and is refused (409) while another verb holds it
// or a restore of it is unfinished.
//
// A plan is refused (400), and nothing recorded, when it names one of the
// keeper's own streams (its index bucket's stream, KV_kept, the acts
// streams KEEPER_ACTS and KEEPER_ACTS_<prefix>, Config.OwnStreams), or a
// stream of another kept data the keeper knows: one another plan lists,
// one a restore point or aside of another kept data holds, or one the
// naming rule gives to another kept data that has points, asides or a plan.
func (k *Keeper) SetPlan(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbSetPlan, r); err != nil {
		return nil, err
	}
	ctx, release, err := k.lock(ctx, VerbSetPlan, r, r.Streams...)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := k.unfinished(ctx, VerbSetPlan, r.Module, r.Local); err != nil {
		return nil, err
	}
	refused := func(err error) (*Reply, error) {
		return nil, fmt.Errorf("%s refused: %w, so no plan was recorded", VerbSetPlan, err)
	}
	for _, s := range r.Streams {
		if k.ownStream(s) {
			return refused(Errorf(ErrBadRequest, "the plan of %s/%s names %s, a stream of the keeper's own (its index or its acts)", r.Module, r.Local, s))
		}
	}
	if err := k.checkUnclaimed(ctx, r.Module, r.Local, r.Streams); err != nil {
		return refused(err)
	}
	p := Plan{Module: r.Module, Local: r.Local, Streams: r.Streams, Consumers: r.Consumers, Format: RecordFormat}
	data, err := json.Marshal(p)
	if err != nil {
		return refused(Errorf(ErrFailed, "the plan could not be encoded: %v", err))
	}
	if err := k.index.Put(ctx, layout.PlanKey(p.Module, p.Local), data); err != nil {
		return nil, fmt.Errorf("%s of %s/%s failed: recording %s in the index: %w, so no plan was recorded",
			VerbSetPlan, r.Module, r.Local, layout.PlanKey(r.Module, r.Local), withKind(ErrNoBus, err))
	}
	said := fmt.Sprintf("Recorded the plan of %s/%s as %s: %d stream(s) (%s) and %d consumer(s); it wins over the naming rule from the next verb on.",
		r.Module, r.Local, layout.PlanKey(r.Module, r.Local), len(p.Streams), strings.Join(p.Streams, ", "), len(p.Consumers))
	k.record(ctx, Act{Verb: VerbSetPlan, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: true,
		What: said, Outcome: "done"})
	return &Reply{Said: said, KeptPlan: &p}, nil
}

// ShowPlan is the recorded plan of r.Module's kept data r.Local
// (show-plan), or an error wrapping ErrNotFound when none is recorded: the
// kept data is then whatever the naming rule finds.
func (k *Keeper) ShowPlan(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbShowPlan, r); err != nil {
		return nil, err
	}
	p, err := k.readPlan(ctx, r.Module, r.Local)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(ErrNotFound, "no plan is recorded for %s/%s (%s); its kept data is whichever of %s exist",
			r.Module, r.Local, layout.PlanKey(r.Module, r.Local), strings.Join(namingRule(r.Module, r.Local), ", "))
	}
	if err != nil {
		return nil, err
	}
	said := fmt.Sprintf("The plan of %s/%s (%s): %d stream(s) (%s) and %d consumer(s).",
		r.Module, r.Local, layout.PlanKey(r.Module, r.Local), len(p.Streams), strings.Join(p.Streams, ", "), len(p.Consumers))
	return &Reply{Said: said, KeptPlan: p}, nil
}

// RemovePlan removes the plan of r.Module's kept data r.Local
// (remove-plan), so that the naming rule applies again; removing a plan
// that is not recorded is not an error. It takes the kept data's lease and
// is refused (409) while a restore of it is unfinished. Restore points
// taken under the plan keep their streams.
func (k *Keeper) RemovePlan(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbRemovePlan, r); err != nil {
		return nil, err
	}
	ctx, release, err := k.lock(ctx, VerbRemovePlan, r)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := k.unfinished(ctx, VerbRemovePlan, r.Module, r.Local); err != nil {
		return nil, err
	}
	_, err = k.index.Get(ctx, layout.PlanKey(r.Module, r.Local))
	was := err == nil
	if err := k.index.Delete(ctx, layout.PlanKey(r.Module, r.Local)); err != nil {
		return nil, fmt.Errorf("%s of %s/%s failed: removing %s from the index: %w, so the plan stays",
			VerbRemovePlan, r.Module, r.Local, layout.PlanKey(r.Module, r.Local), withKind(ErrNoBus, err))
	}
	said := fmt.Sprintf("No plan was recorded for %s/%s; nothing was removed.", r.Module, r.Local)
	if was {
		said = fmt.Sprintf("Removed the plan of %s/%s (%s); its kept data is again whichever of %s exist.",
			r.Module, r.Local, layout.PlanKey(r.Module, r.Local), strings.Join(namingRule(r.Module, r.Local), ", "))
		k.record(ctx, Act{Verb: VerbRemovePlan, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: true,
			What: said, Outcome: "done"})
	}
	return &Reply{Said: said}, nil
}

// ownStream reports whether name is one of the keeper's own streams: the
// default index bucket's and acts streams, any keeper's acts stream
// (KEEPER_ACTS_<prefix>), and Config.OwnStreams.
func (k *Keeper) ownStream(name string) bool {
	return name == "KV_kept" || name == "KEEPER_ACTS" || strings.HasPrefix(name, "KEEPER_ACTS_") || slices.Contains(k.own, name)
}

// checkUnclaimed refuses streams that belong to another kept data the
// keeper knows (see SetPlan).
func (k *Keeper) checkUnclaimed(ctx context.Context, module, local string, streams []string) error {
	self := [2]string{module, local}
	known := map[[2]string]bool{} // kept data with points, asides or a plan
	planned := map[[2]string]bool{}
	claim := func(kd [2]string, s, by, free string) error {
		if kd == self || !slices.Contains(streams, s) {
			return nil
		}
		return Errorf(ErrBadRequest, "the plan of %s/%s names %s, a stream of another kept data, %s/%s (%s); a stream belongs to one kept data "+
			"(%s frees it)", module, local, s, kd[0], kd[1], by, free)
	}
	for _, prefix := range [...]string{"plan.", "point.", "aside."} {
		keys, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return Errorf(ErrFailed, "listing the index to check the plan's streams: %v", err)
		}
		for _, key := range keys {
			parts := strings.Split(key, ".")
			if len(parts) < 3 {
				continue
			}
			kd := [2]string{parts[1], parts[2]}
			known[kd] = true
			if kd == self {
				continue
			}
			data, err := k.index.Get(ctx, key)
			if errors.Is(err, ErrNotFound) {
				continue // removed meanwhile
			}
			if err != nil {
				return Errorf(ErrFailed, "reading %s to check the plan's streams: %v", key, err)
			}
			var rec struct {
				Streams json.RawMessage `json:"streams"`
			}
			if json.Unmarshal(data, &rec) != nil {
				continue // not readable: it names nothing
			}
			var names []string
			if prefix == "plan." {
				planned[kd] = true
				_ = json.Unmarshal(rec.Streams, &names)
			} else {
				var sums []StreamSum
				_ = json.Unmarshal(rec.Streams, &sums)
				names = kept.StreamSumNames(sums)
			}
			by, free := claimedBy(prefix, key)
			for _, s := range names {
				if err := claim(kd, s, by, free); err != nil {
					return err
				}
			}
		}
	}
	for kd := range known {
		if planned[kd] {
			continue // its plan, checked above, wins over the naming rule
		}
		for _, s := range namingRule(kd[0], kd[1]) {
			if err := claim(kd, s, "by the naming rule", "a plan of "+kd[0]+"/"+kd[1]+" that does not list it"); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimedBy says, for the refusal of a plan, how the index record key of
// kind prefix claims a stream and which verb frees it: a plan's
// remove-plan (or a set-plan without it), a point's discard-point, an
// aside's discard-aside.
func claimedBy(prefix, key string) (by, free string) {
	switch prefix {
	case "plan.":
		return "its plan lists it", "remove-plan, or a set-plan of it without the stream,"
	case "point.":
		parts := strings.SplitN(key, ".", 5)
		free = "discard-point of that point"
		if len(parts) == 5 {
			free = fmt.Sprintf("discard-point of that point, `nats-keeper discard-point %s %s --form %s --before %s --why TEXT`,",
				parts[1], parts[2], parts[3], parts[4])
		}
		return "its restore point " + key + " holds it", free
	}
	return "its set-aside copy " + key + " holds it", "discard-aside of that copy"
}

// readPlan reads the recorded plan of module/local, or an error wrapping
// ErrNotFound.
func (k *Keeper) readPlan(ctx context.Context, module, local string) (*Plan, error) {
	data, err := k.index.Get(ctx, layout.PlanKey(module, local))
	if errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, Errorf(ErrFailed, "reading the plan of %s/%s: %v", module, local, err)
	}
	var p Plan
	if err := decodeRecord("the recorded plan "+layout.PlanKey(module, local), data, &p); err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, Errorf(ErrFailed, "the recorded plan of %s/%s is not valid JSON: %v", module, local, err)
	}
	for _, s := range p.Streams {
		if err := CheckStreamName("stream", s); err != nil {
			return nil, Errorf(ErrFailed, "the recorded plan of %s/%s: %v", module, local, err)
		}
	}
	p.Module, p.Local = module, local
	return &p, nil
}

// candidates are the streams that make up a kept data: the recorded plan's,
// or else the naming rule's three.
func (k *Keeper) candidates(ctx context.Context, module, local string) (names []string, planned bool, err error) {
	p, err := k.readPlan(ctx, module, local)
	switch {
	case errors.Is(err, ErrNotFound):
		return namingRule(module, local), false, nil
	case err != nil:
		return nil, false, err
	}
	return p.Streams, true, nil
}

// namingRule is the streams a kept data is made of without a plan.
func namingRule(module, local string) []string {
	bus := module + "_" + local
	return []string{"KV_" + bus, "OBJ_" + bus, bus}
}

// liveStreams returns the kept data's streams that exist on the bus now, and
// the names that were looked for.
func (k *Keeper) liveStreams(ctx context.Context, module, local string) ([]StreamInfo, []string, error) {
	names, _, err := k.candidates(ctx, module, local)
	if err != nil {
		return nil, nil, err
	}
	var live []StreamInfo
	for _, n := range names {
		si, err := k.bus.Stream(ctx, n)
		switch {
		case errors.Is(err, ErrNoStream):
			continue
		case err != nil:
			return nil, names, Errorf(ErrFailed, "looking up stream %s: %v", n, err)
		}
		live = append(live, *si)
	}
	return live, names, nil
}

func streamNames(ss []StreamInfo) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
