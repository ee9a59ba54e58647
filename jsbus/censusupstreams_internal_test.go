package jsbus

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestCensusBookBoundsUpstreams: a stream that names more upstreams than
// the book keeps of one, or one of a name past a stream's, or that would
// take the book past its bound in all, is kept as not known, and the book
// then does not answer Downstreams (which lists every stream); read again
// within the bounds, or dropped, the book answers again, and its count of
// upstreams stays the sum of what it holds.
func TestCensusBookBoundsUpstreams(t *testing.T) {
	b := newCensusBook()
	want := map[string]bool{"up": true}
	sources := func(n int, name string) []upstream {
		out := make([]upstream, n)
		for i := range out {
			out[i] = upstream{name: name, kind: "source", own: true}
		}
		return out
	}
	answers := func(what string, ok bool) {
		t.Helper()
		if _, known := b.downstreams(want); known != ok {
			t.Fatalf("%s: the book answers %v, want %v", what, known, ok)
		}
		n := 0
		for _, ups := range b.ups {
			n += len(ups)
		}
		if n != b.nUps {
			t.Fatalf("%s: the book counts %d upstreams and holds %d", what, b.nUps, n)
		}
	}
	b.setUpstreams("big", sources(maxStreamUpstreams+1, "up"), true)
	answers("a stream past the bound of one", false)
	b.setUpstreams("big", sources(maxStreamUpstreams, "up"), true)
	answers("the stream read again within the bound", true)
	if ds, _ := b.downstreams(want); !slices.Equal(ds, []keeper.Downstream{{Stream: "big", Kind: "source", Upstream: "up"}}) {
		t.Fatalf("the downstreams of up are %+v, want big's source once", ds)
	}
	b.setUpstreams("long", sources(1, strings.Repeat("n", maxUpstreamName+1)), true)
	answers("a name past a stream's", false)
	b.dropStream("long")
	answers("that stream dropped", true)
	b.setUpstreams("offline", nil, false)
	answers("a stream not read", false)
	b.dropStream("offline")
	for i := 0; b.nUps+maxStreamUpstreams <= maxBookUpstreams; i++ {
		b.setUpstreams(fmt.Sprint("s", i), sources(maxStreamUpstreams, "x"), true)
	}
	answers("the book just within its bound", true)
	b.setUpstreams("last", sources(maxStreamUpstreams, "x"), true)
	answers("a stream past the book's bound", false)
	b.dropStream("big")
	b.setUpstreams("last", sources(maxStreamUpstreams, "x"), true)
	answers("the stream read again once another left", true)
}

// TestCensusBookStreamOfAConsumerFirst: a consumer heard of before its
// stream (the stream's advisory still on its way) puts in a stream whose
// upstreams are not known, until the stream is read.
func TestCensusBookStreamOfAConsumerFirst(t *testing.T) {
	b := newCensusBook()
	b.put("new", "c", consumerOwner{})
	if _, known := b.downstreams(map[string]bool{"up": true}); known {
		t.Fatal("the book answers Downstreams while a stream it holds was never read")
	}
	b.put("new", "d", consumerOwner{})
	b.setUpstreams("new", []upstream{{name: "up", kind: "mirror", own: true}}, true)
	if ds, known := b.downstreams(map[string]bool{"up": true}); !known || len(ds) != 1 {
		t.Fatalf("once the stream was read the book answers %+v, %v", ds, known)
	}
	b.put("new", "e", consumerOwner{})
	if _, known := b.downstreams(nil); !known {
		t.Fatal("a consumer put on a stream the book had read made its upstreams not known")
	}
}
