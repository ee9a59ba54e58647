package keeper

import (
	"context"
	"encoding/json"
	"errors"
)

func planKey(module, local string) string { return "plan." + module + "." + local }

// SetPlan records the plan of one kept data: the explicit list of its
// streams, which wins over the naming rule.
func (k *Keeper) SetPlan(ctx context.Context, p Plan) error {
	if err := ValidName("module", p.Module); err != nil {
		return err
	}
	if err := ValidName("local", p.Local); err != nil {
		return err
	}
	if err := checkKept(p.Module, p.Local); err != nil {
		return err
	}
	if len(p.Streams) == 0 || len(p.Streams) > 64 {
		return Errorf(ErrBadRequest, "a plan names 1 to 64 streams, not %d", len(p.Streams))
	}
	for _, s := range p.Streams {
		if err := CheckStreamName("stream", s); err != nil {
			return err
		}
	}
	if len(p.Consumers) > 256 {
		return Errorf(ErrBadRequest, "a plan names at most 256 consumers, not %d", len(p.Consumers))
	}
	for _, c := range p.Consumers {
		if err := CheckStreamName("the stream of a plan's consumer", c.Stream); err != nil {
			return err
		}
		if err := CheckStreamName("consumer", c.Consumer); err != nil {
			return err
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := k.index.Put(ctx, planKey(p.Module, p.Local), data); err != nil {
		return Errorf(ErrFailed, "plan for %s/%s was not recorded: %v", p.Module, p.Local, err)
	}
	return nil
}

// readPlan reads the recorded plan of module/local, or an error wrapping
// ErrNotFound.
func (k *Keeper) readPlan(ctx context.Context, module, local string) (*Plan, error) {
	data, err := k.index.Get(ctx, planKey(module, local))
	if errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, Errorf(ErrFailed, "reading the plan of %s/%s: %v", module, local, err)
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
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
