package jsbus

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// maxCensusConsumers bounds the consumers a census book holds. A consumer
// costs the keeper some 250 bytes (its name and its owner's metadata in the
// book, the maps' overhead; measured as the keeper's RSS with 50,000
// consumers on the bus against none, the full census's passing lists
// included), so the book of a bus at the bound is some 50 MiB; a bus with
// more makes every census list every stream, as if the advisories could not
// be heard (Census).
const maxCensusConsumers = 200_000

// consumerOwner is what the book keeps of one consumer besides its name:
// the owner its metadata declares. A value longer than a name cannot name a
// module or a kept data, and is kept as "".
type consumerOwner struct {
	module, local string // metadata nats-keeper.module and nats-keeper.local, "" when none
}

// ownerOf reads the owner a consumer's configuration declares.
func ownerOf(cfg json.RawMessage) consumerOwner {
	if !bytes.Contains(cfg, []byte(`"`+keeper.MetaModule+`"`)) {
		return consumerOwner{}
	}
	var c struct {
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(cfg, &c) != nil {
		return consumerOwner{}
	}
	name := func(s string) string {
		if len(s) > keeper.MaxNameLen {
			return ""
		}
		return s
	}
	return consumerOwner{module: name(c.Metadata[keeper.MetaModule]), local: name(c.Metadata[keeper.MetaLocal])}
}

// censusBook is every stream on the bus and every consumer on each (durable
// or not: the account's totals count them all), with its owner, and the
// upstreams each stream's configuration names (censusupstreams.go). It is
// not safe for concurrent use: censusWatch guards it.
type censusBook struct {
	streams map[string]map[string]consumerOwner
	n       int      // consumers
	sorted  []string // the streams, sorted, once names asked for them; nil when a stream came or went since
	// ups are the upstreams of the streams that name any; unknown, the
	// streams whose upstreams are not known; nUps counts ups.
	ups     map[string][]upstream
	unknown map[string]bool
	nUps    int
}

func newCensusBook() *censusBook {
	return &censusBook{streams: map[string]map[string]consumerOwner{}, ups: map[string][]upstream{}, unknown: map[string]bool{}}
}

// addStream notes that stream is on the bus.
func (b *censusBook) addStream(stream string) {
	if _, ok := b.streams[stream]; !ok {
		b.streams[stream] = map[string]consumerOwner{}
		b.sorted = nil
	}
}

// dropStream forgets stream, its consumers and its upstreams.
func (b *censusBook) dropStream(stream string) {
	b.forgetUpstreams(stream)
	if cs, ok := b.streams[stream]; ok {
		b.n -= len(cs)
		delete(b.streams, stream)
		b.sorted = nil
	}
}

// put notes the consumer, and its stream, with its owner. A stream the
// book did not hold (its advisory still on its way) is noted with its
// upstreams not known, until it is read.
func (b *censusBook) put(stream, consumer string, o consumerOwner) {
	if _, ok := b.streams[stream]; !ok {
		b.addStream(stream)
		b.setUpstreams(stream, nil, false)
	}
	if _, ok := b.streams[stream][consumer]; !ok {
		b.n++
	}
	b.streams[stream][consumer] = o
}

// drop forgets the consumer.
func (b *censusBook) drop(stream, consumer string) {
	if cs, ok := b.streams[stream]; ok {
		if _, ok := cs[consumer]; ok {
			delete(cs, consumer)
			b.n--
		}
	}
}

// setStream replaces what the book holds of stream by its consumers cs.
func (b *censusBook) setStream(stream string, cs map[string]consumerOwner) {
	b.addStream(stream)
	b.n += len(cs) - len(b.streams[stream])
	b.streams[stream] = cs
}

// refresh takes the owners of the consumers of a list made afresh, of
// those the book holds (one it does not hold yet is one whose advisory is
// on its way).
func (b *censusBook) refresh(ps []keeper.Position) {
	for _, p := range ps {
		if cs, ok := b.streams[p.Stream]; ok {
			if _, ok := cs[p.Consumer]; ok {
				cs[p.Consumer] = ownerOf(p.Config)
			}
		}
	}
}

// names are the streams, sorted: a copy, the book keeps its own.
func (b *censusBook) names() []string {
	if b.sorted == nil {
		b.sorted = slices.Sorted(maps.Keys(b.streams))
	}
	return slices.Clone(b.sorted)
}

// wanted are the streams, but those of skip, that hold a consumer q wants,
// sorted.
func (b *censusBook) wanted(q keeper.CensusQuery) []string {
	named := map[string]map[string]bool{}
	for _, c := range q.Named {
		if named[c.Stream] == nil {
			named[c.Stream] = map[string]bool{}
		}
		named[c.Stream][c.Consumer] = true
	}
	var out []string
	for s, cs := range b.streams {
		if slices.Contains(q.Skip, s) {
			continue
		}
		for c, o := range cs {
			if named[s][c] || q.Wants(c, o.module) {
				out = append(out, s)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
