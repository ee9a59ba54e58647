package keeper

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
)

// diffConsumers is each of the module's consumers, its position at the
// point p (its recorded ack floor) and now: those p recorded, whether or
// not they are live, and the live ones the ownership rules (owners) give
// to the kept data r names that p did not record. The census is the one a
// restore plans its positions with: the consumers the module's naming
// rule and metadata may give it, those the point recorded and those its
// plan declares.
func (k *Keeper) diffConsumers(ctx context.Context, r Request, p *Point) ([]kept.ConsumerChange, error) {
	named, err := k.planConsumers(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	for _, pos := range p.Positions {
		named = append(named, PlanConsumer{Stream: pos.Stream, Consumer: pos.Consumer})
	}
	streams, live, err := k.census(ctx, CensusQuery{Module: r.Module, Named: named})
	if err != nil {
		return nil, err
	}
	o, err := k.owners(ctx, streams, r.Module, consumerNames(append(slices.Clone(p.Positions), live...)))
	if err != nil {
		return nil, err
	}
	key := func(stream, consumer string) string { return stream + "\x00" + consumer }
	now := map[string]Position{}
	for _, c := range live {
		now[key(c.Stream, c.Consumer)] = c
	}
	out := []kept.ConsumerChange{}
	then := map[string]bool{}
	for _, pos := range p.Positions {
		cc := kept.ConsumerChange{Stream: pos.Stream, Consumer: pos.Consumer, Then: pos.AckFloor}
		if c, ok := now[key(pos.Stream, pos.Consumer)]; ok {
			cc.Now = c.AckFloor
		} else {
			cc.Gone = true
		}
		then[key(pos.Stream, pos.Consumer)] = true
		out = append(out, cc)
	}
	for _, c := range live {
		if !then[key(c.Stream, c.Consumer)] && o.owns(r.Module, r.Local, c) {
			out = append(out, kept.ConsumerChange{Stream: c.Stream, Consumer: c.Consumer, Now: c.AckFloor, New: true})
		}
	}
	slices.SortFunc(out, func(x, y kept.ConsumerChange) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Consumer, y.Consumer))
	})
	return out, nil
}
