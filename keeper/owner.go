package keeper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// Consumer metadata keys that declare a consumer's owner. A consumer whose
// metadata holds MetaModule belongs to that module and no other; with
// MetaLocal too, only to that one kept data of it.
const (
	MetaModule = "nats-keeper.module"
	MetaLocal  = "nats-keeper.local"
)

// owners decides which module, and which kept data, a durable consumer
// belongs to (design.md, "the module's consumers"):
//
//  1. metadata nats-keeper.module (and nats-keeper.local) wins;
//  2. then a plan that lists the consumer, which ties it to that kept data;
//  3. then the naming rule: the consumer is named <module>, <module>_… or
//     <module>-…, unless it fits the naming rule of a longer module that
//     the bus knows (by its streams, buckets, object stores, points, asides
//     or plans), which then owns it.
//
// A consumer that rule 3, or metadata naming the module alone, gives to the
// module sits on some stream; when that stream is one of another kept data
// of the same module (by its bus name or by that kept data's plan), the
// consumer is that kept data's, not this one's. So restoring one kept data
// never sets back a consumer of its sibling, even when their consumers
// share a name.
type owners struct {
	known   map[string]bool      // module names the bus knows
	planned map[string][2]string // stream\x00consumer -> {module, local}
	streams map[string][2]string // stream a plan lists -> {module, local}
}

// CensusQuery says which consumers a census lists (Bus.Census).
type CensusQuery struct {
	// Skip names the streams whose consumers are not listed: a snapshot
	// reads those from the streams' own snapshots.
	Skip []string
	// Module is the module whose consumers are wanted: those its naming
	// rule fits (fitsModule) and those whose metadata names it.
	Module string
	// Named are consumers wanted by stream and name: those the kept data's
	// plan declares, or a point records.
	Named []PlanConsumer
	// Every wants every consumer (a census as full as the bus holds; tests
	// compare with it).
	Every bool
}

// Wants reports whether the consumer may be q.Module's, as far as its name
// and the module its metadata names (metaModule, "" when none) tell, or q
// wants every consumer; those of q.Named are wanted besides. The ownership
// rules (owners) then decide on its configuration as the server holds it.
// It is wider than they are: a consumer it wants may turn out another's,
// never the other way round.
func (q CensusQuery) Wants(consumer, metaModule string) bool {
	return q.Every || (q.Module != "" && (metaModule == q.Module || fitsModule(q.Module, consumer)))
}

// census names every stream on the bus and lists the durable consumers of
// the streams that hold one q wants, but those of q.Skip (Bus.Census): the
// streams come back by name alone, which is all the ownership rules read of
// them.
func (k *Keeper) census(ctx context.Context, q CensusQuery) ([]StreamInfo, []Position, error) {
	names, consumers, err := k.bus.Census(ctx, q)
	if err != nil {
		return nil, nil, Errorf(ErrFailed, "taking the census of the streams and consumers on the bus: %v", err)
	}
	streams := make([]StreamInfo, len(names))
	for i, n := range names {
		streams[i] = StreamInfo{Name: n}
	}
	return streams, consumers, nil
}

// planConsumers are the consumers the plan of module's kept data local
// declares its own: no plan, none.
func (k *Keeper) planConsumers(ctx context.Context, module, local string) ([]PlanConsumer, error) {
	p, err := k.readPlan(ctx, module, local)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return p.Consumers, nil
}

// maxProbes bounds the module names owners asks the index about one by
// one; more are answered from one list of every point and aside key.
const maxProbes = 64

// owners reads what the bus knows of modules, as far as it decides which of
// the consumers named (live or recorded) are module's: its streams (as
// census listed them), its plans, and, for each longer module those names
// could belong to, whether the index holds a point or an aside of it. The
// result answers owns for module only.
func (k *Keeper) owners(ctx context.Context, streams []StreamInfo, module string, names []string) (*owners, error) {
	o := &owners{known: map[string]bool{}, planned: map[string][2]string{}, streams: map[string][2]string{}}
	for _, s := range streams {
		name := s.Name
		for _, p := range []string{"KV_", "OBJ_"} {
			name = strings.TrimPrefix(name, p)
		}
		for i := 1; i < len(name); i++ {
			if name[i] == '_' {
				o.known[name[:i]] = true
			}
		}
	}
	if err := k.readPlans(ctx, o); err != nil {
		return nil, err
	}
	// The longer modules that could own a consumer by its name, not yet
	// known by a stream or a plan: only the index's points and asides
	// can make them known. Past maxProbes of them the index is listed
	// whole, so the names are not looked at further.
	longer := map[string]bool{}
names:
	for _, name := range names {
		if !fitsModule(module, name) {
			continue
		}
		for i := len(module) + 1; i <= len(name); i++ {
			if i < len(name) && name[i] != '_' && name[i] != '-' {
				continue
			}
			if x := name[:i]; !o.known[x] && !longer[x] && ValidName("module", x) == nil {
				if longer[x] = true; len(longer) > maxProbes {
					break names
				}
			}
		}
	}
	if len(longer) == 0 {
		return o, nil
	}
	probe := []string{"point.", "aside."}
	if len(longer) <= maxProbes {
		probe = probe[:0]
		for x := range longer {
			probe = append(probe, "point."+x+".", "aside."+x+".")
		}
		slices.Sort(probe)
	}
	keys, err := k.keysUnder(ctx, probe)
	if err != nil {
		return nil, Errorf(ErrFailed, "listing the index: %v", err)
	}
	for _, key := range keys {
		if parts := strings.Split(key, "."); len(parts) >= 3 {
			o.known[parts[1]] = true
		}
	}
	return o, nil
}

// maxLiveProbes bounds the prefixes keysUnder lists one request each
// (listKeys); more are listed with one watch of the index.
const maxLiveProbes = 16

// keysUnder is Index.KeysUnder, listed without a consumer (listKeys, one
// request per prefix) when the prefixes are few: a census's owners read
// them in every snapshot, and a consumer made and deleted there would change
// the account's totals under the census of a verb running beside it.
func (k *Keeper) keysUnder(ctx context.Context, prefixes []string) ([]string, error) {
	if _, ok := k.index.(liveKeyLister); !ok || len(prefixes) > maxLiveProbes {
		return k.index.KeysUnder(ctx, prefixes)
	}
	var out []string
	for _, p := range prefixes {
		keys, err := k.listKeys(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// readPlans adds every plan in the index to o: its module is known, and its
// streams and consumers are its kept data's. The keys are listed without a
// consumer (listKeys): one made and deleted in every census would change
// the account's totals under the census of a verb running beside it.
func (k *Keeper) readPlans(ctx context.Context, o *owners) error {
	keys, err := k.listKeys(ctx, "plan.")
	if err != nil {
		return Errorf(ErrFailed, "listing the index: %v", err)
	}
	for _, key := range keys {
		parts := strings.Split(key, ".")
		if len(parts) < 3 {
			continue
		}
		o.known[parts[1]] = true
		p, err := k.readPlan(ctx, parts[1], parts[2])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		for _, c := range p.Consumers {
			o.planned[c.Stream+"\x00"+c.Consumer] = [2]string{p.Module, p.Local}
		}
		for _, s := range p.Streams {
			o.streams[s] = [2]string{p.Module, p.Local}
		}
	}
	return nil
}

// owns reports whether the consumer (as its configuration stands in
// c.Config) belongs to module's kept data local.
func (o *owners) owns(module, local string, c Position) bool {
	meta := consumerMetadata(c.Config)
	if m, ok := meta[MetaModule]; ok {
		if l, ok := meta[MetaLocal]; ok {
			return m == module && l == local
		}
		return m == module && !o.siblingStream(module, local, c.Stream)
	}
	if ml, ok := o.planned[c.Stream+"\x00"+c.Consumer]; ok {
		return ml == [2]string{module, local}
	}
	return o.ownsByName(module, c.Consumer) && !o.siblingStream(module, local, c.Stream)
}

// siblingStream reports whether stream is one of another kept data of
// module: listed by that kept data's plan, or named by the naming rule
// (<module>_<other>, KV_… or OBJ_…) and not listed by local's own plan.
func (o *owners) siblingStream(module, local, stream string) bool {
	if ml, ok := o.streams[stream]; ok && ml[0] == module {
		return ml[1] != local
	}
	name := stream
	for _, p := range []string{"KV_", "OBJ_"} {
		name = strings.TrimPrefix(name, p)
	}
	other, ok := strings.CutPrefix(name, module+"_")
	return ok && other != local
}

// ownsByName is the naming rule, with the longer known module winning.
func (o *owners) ownsByName(module, name string) bool {
	if !fitsModule(module, name) {
		return false
	}
	for i := len(module) + 1; i <= len(name); i++ {
		if i < len(name) && name[i] != '_' && name[i] != '-' {
			continue
		}
		if o.known[name[:i]] {
			return false // a longer module the bus knows owns it
		}
	}
	return true
}

// fitsModule is the bare naming rule: name is module, or begins with
// module+"_" or module+"-".
func fitsModule(module, name string) bool {
	if !strings.HasPrefix(name, module) {
		return false
	}
	return len(name) == len(module) || name[len(module)] == '_' || name[len(module)] == '-'
}

// consumerMetadata is the metadata map of a consumer configuration, or nil
// when it has no MetaModule key (only then does owns read the map). The
// server writes a configuration with Go's encoding/json, which writes that
// key as it is (quoted, nothing escaped), so a configuration without those
// bytes has no such key and is not decoded: on a server of 2.11 or later
// every consumer has metadata of the server's own.
func consumerMetadata(cfg json.RawMessage) map[string]string {
	if !bytes.Contains(cfg, []byte(`"`+MetaModule+`"`)) {
		return nil
	}
	var c struct {
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(cfg, &c) != nil {
		return nil
	}
	return c.Metadata
}

// consumerNames are the names of the consumers of ps.
func consumerNames(ps []Position) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Consumer
	}
	return out
}
