package jsbus

import (
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// FuzzCensusAdvisory: any advisory subject the server might send is taken
// without a panic, marks at most one stream or consumer (named by its own
// tokens), and the marks stay within maxMarks; any consumer configuration
// gives an owner whose names fit a name's length.
func FuzzCensusAdvisory(f *testing.F) {
	f.Add("$JS.EVENT.ADVISORY.CONSUMER.CREATED.s.c", []byte(`{"durable_name":"c","metadata":{"nats-keeper.module":"m","nats-keeper.local":"l"}}`))
	f.Add("$JS.EVENT.ADVISORY.STREAM.UPDATED.s", []byte(`{}`))
	f.Add("$JS.EVENT.ADVISORY.STREAM.DELETED.s", []byte(`{"metadata":{"nats-keeper.module":1}}`))
	f.Add("$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.s.x.y", []byte(`not json "nats-keeper.module"`))
	f.Add("$JS.EVENT.ADVISORY.CONSUMER.DELETED..", []byte(`{}`))
	f.Fuzz(func(t *testing.T, subject string, cfg []byte) {
		w := &censusWatch{book: newCensusBook(), streams: map[string]bool{}, consumers: map[[2]string]bool{}}
		w.heard(subject)
		if n := len(w.streams) + len(w.consumers); n > 1 {
			t.Fatalf("one advisory %q marked %d", subject, n)
		}
		for c := range w.consumers {
			if c[0] == "" || c[1] == "" {
				t.Fatalf("advisory %q marked a consumer or stream of no name: %q", subject, c)
			}
		}
		if w.streams[""] {
			t.Fatalf("advisory %q marked a stream of no name", subject)
		}
		o := ownerOf(cfg)
		if len(o.module) > keeper.MaxNameLen || len(o.local) > keeper.MaxNameLen {
			t.Fatalf("owner %+v of %q is longer than a name", o, cfg)
		}
	})
}
