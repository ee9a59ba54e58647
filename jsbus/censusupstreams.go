package jsbus

import (
	"cmp"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The census book keeps of each stream the mirror and sources its
// configuration names (Downstreams reads them), within bounds: at most
// maxStreamUpstreams of one stream, maxBookUpstreams in all, each name at
// most maxUpstreamName bytes (the server's bound on a stream's name). An
// upstream costs the book some 60 bytes (its name, its kind, the slice),
// so the book holds at most some 10 MiB of them, 30 MiB were every name
// of the longest. A stream past a bound is kept as one whose upstreams
// are not known, as is one whose server did not answer the full census's
// list: while the book holds any, Downstreams lists every stream instead.
const (
	maxStreamUpstreams = 256
	maxBookUpstreams   = 100_000
	maxUpstreamName    = 255
)

// upstreamConfig is the part of a stream's configuration that names its
// upstreams.
type upstreamConfig struct {
	Mirror  *upstreamRef  `json:"mirror"`
	Sources []upstreamRef `json:"sources"`
}

// upstream is a mirror or source a stream's configuration names: its
// name, its kind ("mirror" or "source"), and whether it is in the
// adapter's own JetStream (ownUpstream).
type upstream struct {
	name, kind string
	own        bool
}

// upstreamsOf reads the upstreams a stream's configuration names.
func (a *Adapter) upstreamsOf(c upstreamConfig) []upstream {
	var out []upstream
	if c.Mirror != nil {
		out = append(out, upstream{name: c.Mirror.Name, kind: "mirror", own: a.ownUpstream(*c.Mirror)})
	}
	for _, s := range c.Sources {
		out = append(out, upstream{name: s.Name, kind: "source", own: a.ownUpstream(s)})
	}
	return out
}

// setUpstreams replaces what the book holds of stream's upstreams: ups,
// when known says they were read; past the bounds, or not read, the
// stream's upstreams are not known.
func (b *censusBook) setUpstreams(stream string, ups []upstream, known bool) {
	b.forgetUpstreams(stream)
	fits := known && len(ups) <= maxStreamUpstreams && b.nUps+len(ups) <= maxBookUpstreams &&
		!slices.ContainsFunc(ups, func(u upstream) bool { return len(u.name) > maxUpstreamName })
	switch {
	case !fits:
		b.unknown[stream] = true
	case len(ups) > 0:
		b.ups[stream] = slices.Clip(ups)
		b.nUps += len(ups)
	}
}

// forgetUpstreams forgets what the book holds of stream's upstreams.
func (b *censusBook) forgetUpstreams(stream string) {
	b.nUps -= len(b.ups[stream])
	delete(b.ups, stream)
	delete(b.unknown, stream)
}

// downstreams are the book's streams that mirror or source one of want in
// this JetStream, as Downstreams gives them; known is false when the book
// holds a stream whose upstreams it does not know.
func (b *censusBook) downstreams(want map[string]bool) (ds []keeper.Downstream, known bool) {
	if len(b.unknown) > 0 {
		return nil, false
	}
	set := newDownstreamSet(want)
	for s, ups := range b.ups {
		set.add(s, ups)
	}
	return set.sorted(), true
}

// downstreamSet gathers the downstreams of the wanted streams, each once.
type downstreamSet struct {
	want map[string]bool
	seen map[keeper.Downstream]bool
	out  []keeper.Downstream
}

func newDownstreamSet(want map[string]bool) *downstreamSet {
	return &downstreamSet{want: want, seen: map[keeper.Downstream]bool{}}
}

// add takes stream's upstreams that are wanted and in this JetStream.
func (d *downstreamSet) add(stream string, ups []upstream) {
	for _, u := range ups {
		ds := keeper.Downstream{Stream: stream, Kind: u.kind, Upstream: u.name}
		if d.want[u.name] && u.own && !d.seen[ds] {
			d.seen[ds] = true
			d.out = append(d.out, ds)
		}
	}
}

// sorted gives the downstreams by stream, upstream and kind.
func (d *downstreamSet) sorted() []keeper.Downstream {
	slices.SortFunc(d.out, func(x, y keeper.Downstream) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Upstream, y.Upstream), strings.Compare(x.Kind, y.Kind))
	})
	return d.out
}
