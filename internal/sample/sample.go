// Package sample makes, changes and dumps the kept data of a module on a real
// bus, for tests and for the demo. Everything it makes follows the naming rule
// of the contract: the kept data `local` of module `module` is the KV bucket,
// the object store and the plain stream named `<module>_<local>`, and the
// module's consumers are durables named `<module>_…` or `<module>-…`.
//
// Content is deterministic where JetStream allows it (seeded from the names),
// so two dumps of the same state compare equal; object chunk subjects carry a
// random NUID and so differ between two separate Creates.
//
// It imports nats.go only, and no package of this module.
package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SharedStream is the stream that several modules read, with subjects events.>.
const SharedStream = "SHARED_EVENTS"

// OtherConsumer is the durable of another module on SharedStream, which a
// module's restore must leave exactly as it was.
const OtherConsumer = "other-events"

// Object names in the sample object store.
const (
	BigObject   = "big.bin"
	SmallObject = "small.txt"
)

// Sizes of the big object before and after Change, and its chunk size.
const (
	BigSize        = 600*1024 + 123
	BigChangedSize = 700*1024 + 7
	ChunkSize      = 128 * 1024
)

// Option changes how Create makes the sample.
type Option func(*config)

type config struct {
	replicas int
}

// Replicas sets the replica count of every stream Create makes (default 1).
func Replicas(n int) Option {
	return func(c *config) { c.replicas = n }
}

// Names are the bus names of one module's sample kept data.
type Names struct {
	Bus      string // <module>_<local>: the KV bucket, object store and stream name
	KVStream string // KV_<bus>
	ObjStrm  string // OBJ_<bus>
	Stream   string // <bus>
	Reader   string // <module>_reader on Stream
	Audit    string // <module>-audit on Stream
	Events   string // <module>-events on SharedStream
}

// NamesOf returns the names Create uses for module and local.
func NamesOf(module, local string) Names {
	bus := module + "_" + local
	return Names{
		Bus:      bus,
		KVStream: "KV_" + bus,
		ObjStrm:  "OBJ_" + bus,
		Stream:   bus,
		Reader:   module + "_reader",
		Audit:    module + "-audit",
		Events:   module + "-events",
	}
}

// Streams lists the three streams of the kept data, in a fixed order.
func (n Names) Streams() []string { return []string{n.KVStream, n.ObjStrm, n.Stream} }

func checkNames(module, local string) error {
	for _, s := range []string{module, local} {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00 *>.") {
			return fmt.Errorf("sample: %q is not a plain name, so nothing was made", s)
		}
	}
	if module+"-events" == OtherConsumer {
		return fmt.Errorf("sample: module %q would own %s, which stands for another module, so nothing was made", module, OtherConsumer)
	}
	return nil
}

func seedOf(module, local string, round uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(module + "/" + local))
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15+round))
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Create makes the kept data `local` of module `module`: a KV bucket with
// history, deletions and a purge; an object store with a multi-chunk object
// and a small one; a plain stream with headers and two durable pull consumers
// of the module at different ack floors; and, on SharedStream (created when
// missing), events of the module with its durable `<module>-events` and the
// other module's OtherConsumer (created and advanced only when missing).
func Create(ctx context.Context, js jetstream.JetStream, module, local string, opts ...Option) error {
	if err := checkNames(module, local); err != nil {
		return err
	}
	c := config{replicas: 1}
	for _, o := range opts {
		o(&c)
	}
	ctx, cancel := setupCtx(ctx)
	defer cancel()
	n := NamesOf(module, local)
	r := seedOf(module, local, 0)
	if err := createKV(ctx, js, n, c, r); err != nil {
		return err
	}
	if err := createObjects(ctx, js, n, c, r); err != nil {
		return err
	}
	if err := createStream(ctx, js, module, local, n, c); err != nil {
		return err
	}
	return createEvents(ctx, js, module, n, c)
}

func createKV(ctx context.Context, js jetstream.JetStream, n Names, c config, r *rand.Rand) error {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.Bus, History: 5, Storage: jetstream.FileStorage, Replicas: c.replicas,
	})
	if err != nil {
		return fmt.Errorf("sample: create KV bucket %s: %w", n.Bus, err)
	}
	if err := waitLeader(ctx, js, n.KVStream, c); err != nil {
		return err
	}
	put := func(key, val string) error {
		if _, err := kv.PutString(ctx, key, val); err != nil {
			return fmt.Errorf("sample: put %s in %s: %w", key, n.Bus, err)
		}
		return nil
	}
	for rev := 1; rev <= 3; rev++ {
		for i := 1; i <= 8; i++ {
			if err := put(fmt.Sprintf("user.%d", i), fmt.Sprintf("user %d rev %d %08x", i, rev, r.Uint32())); err != nil {
				return err
			}
		}
	}
	for _, kv := range [][2]string{
		{"config.colour", "blue"}, {"config.size", "large"}, {"config.colour", "green"},
		{"tmp.a", "scratch a"}, {"tmp.b", "scratch b"}, {"gone", "soon purged"}, {"gone", "purged now"},
	} {
		if err := put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	if err := kv.Delete(ctx, "tmp.a"); err != nil {
		return fmt.Errorf("sample: delete tmp.a in %s: %w", n.Bus, err)
	}
	if err := kv.Purge(ctx, "gone"); err != nil {
		return fmt.Errorf("sample: purge gone in %s: %w", n.Bus, err)
	}
	return nil
}

func createObjects(ctx context.Context, js jetstream.JetStream, n Names, c config, r *rand.Rand) error {
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: n.Bus, Storage: jetstream.FileStorage, Replicas: c.replicas,
	})
	if err != nil {
		return fmt.Errorf("sample: create object store %s: %w", n.Bus, err)
	}
	if err := waitLeader(ctx, js, n.ObjStrm, c); err != nil {
		return err
	}
	meta := jetstream.ObjectMeta{Name: BigObject, Opts: &jetstream.ObjectMetaOptions{ChunkSize: ChunkSize}}
	// A leader just elected may not yet be subscribed where the put arrives:
	// no responders means nothing was stored, so the first put is sent again.
	err = untilHeard(ctx, func() error { _, err := obs.PutBytes(ctx, BigObject, nil); return err })
	if err != nil { // a first version, replaced below
		return fmt.Errorf("sample: put %s in %s: %w", BigObject, n.Bus, err)
	}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(randBytes(r, BigSize))); err != nil {
		return fmt.Errorf("sample: put %s in %s: %w", BigObject, n.Bus, err)
	}
	if _, err := obs.PutString(ctx, SmallObject, "a small object of "+n.Bus+"\n"); err != nil {
		return fmt.Errorf("sample: put %s in %s: %w", SmallObject, n.Bus, err)
	}
	return nil
}

// kinds of the plain stream's subjects: <module>.<local>.<kind>.<n>.
var kinds = []string{"orders", "refunds", "notes"}

func publish(ctx context.Context, js jetstream.JetStream, subject string, data []byte, hdr map[string]string) error {
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("sample: publish to %s: %w", subject, err)
	}
	return nil
}

func publishStream(ctx context.Context, js jetstream.JetStream, module, local string, from, count int) error {
	for i := from; i < from+count; i++ {
		kind := kinds[i%len(kinds)]
		subj := fmt.Sprintf("%s.%s.%s.%d", module, local, kind, i%7)
		data := fmt.Appendf(nil, `{"n":%d,"kind":%q,"module":%q}`, i, kind, module)
		if err := publish(ctx, js, subj, data, map[string]string{"Sample-N": fmt.Sprint(i), "Sample-Kind": kind}); err != nil {
			return err
		}
	}
	return nil
}

func createStream(ctx context.Context, js jetstream.JetStream, module, local string, n Names, c config) error {
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: n.Stream, Subjects: []string{module + "." + local + ".>"},
		Storage: jetstream.FileStorage, Replicas: c.replicas,
	})
	if err != nil {
		return fmt.Errorf("sample: create stream %s: %w", n.Stream, err)
	}
	if err := waitLeader(ctx, js, n.Stream, c); err != nil {
		return err
	}
	if err := publishStream(ctx, js, module, local, 0, 50); err != nil {
		return err
	}
	// An interior gap: message 10 is removed.
	if err := s.DeleteMsg(ctx, 10); err != nil {
		return fmt.Errorf("sample: delete message 10 of %s: %w", n.Stream, err)
	}
	reader, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: n.Reader, AckPolicy: jetstream.AckExplicitPolicy, Replicas: c.replicas,
	})
	if err != nil {
		return fmt.Errorf("sample: create consumer %s on %s: %w", n.Reader, n.Stream, err)
	}
	audit, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: n.Audit, AckPolicy: jetstream.AckExplicitPolicy, Replicas: c.replicas,
		FilterSubjects: []string{module + "." + local + ".orders.>", module + "." + local + ".refunds.>"},
	})
	if err != nil {
		return fmt.Errorf("sample: create consumer %s on %s: %w", n.Audit, n.Stream, err)
	}
	if err := Ack(ctx, reader, 20); err != nil {
		return err
	}
	return Ack(ctx, audit, 7)
}

func sharedConfig(c config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: SharedStream, Subjects: []string{"events.>"}, Storage: jetstream.FileStorage, Replicas: c.replicas,
	}
}

func publishEvents(ctx context.Context, js jetstream.JetStream, module string, from, count int) error {
	for i := from; i < from+count; i++ {
		verb := []string{"created", "updated", "closed"}[i%3]
		if err := publish(ctx, js, "events."+module+"."+verb, fmt.Appendf(nil, "event %d of %s", i, module),
			map[string]string{"Sample-Event": fmt.Sprint(i)}); err != nil {
			return err
		}
		if i%4 == 0 { // an event of another module in between
			if err := publish(ctx, js, "events.other.tick", fmt.Appendf(nil, "tick %d", i), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func createEvents(ctx context.Context, js jetstream.JetStream, module string, n Names, c config) error {
	s, err := js.CreateOrUpdateStream(ctx, sharedConfig(c))
	if err != nil {
		return fmt.Errorf("sample: create stream %s: %w", SharedStream, err)
	}
	if err := waitLeader(ctx, js, SharedStream, c); err != nil {
		return err
	}
	if err := publishEvents(ctx, js, module, 0, 15); err != nil {
		return err
	}
	events, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: n.Events, AckPolicy: jetstream.AckExplicitPolicy, Replicas: c.replicas,
		FilterSubject: "events." + module + ".>",
	})
	if err != nil {
		return fmt.Errorf("sample: create consumer %s on %s: %w", n.Events, SharedStream, err)
	}
	if err := Ack(ctx, events, 6); err != nil {
		return err
	}
	_, err = s.Consumer(ctx, OtherConsumer)
	if err == nil {
		return nil // another module's consumer: never touched once it exists
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("sample: look up consumer %s on %s: %w", OtherConsumer, SharedStream, err)
	}
	other, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: OtherConsumer, AckPolicy: jetstream.AckExplicitPolicy, Replicas: c.replicas,
	})
	if err != nil {
		return fmt.Errorf("sample: create consumer %s on %s: %w", OtherConsumer, SharedStream, err)
	}
	return Ack(ctx, other, 3)
}

// Ack fetches exactly count messages from the pull consumer and acknowledges
// each, waiting for the server's confirmation, so the consumer's ack floor
// moves forward by count messages. The messages must already be in the stream.
func Ack(ctx context.Context, c jetstream.Consumer, count int) error {
	name := c.CachedInfo().Name
	unheard := time.Now().Add(30 * time.Second)
	for got := 0; got < count; {
		batch, err := c.Fetch(count-got, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return fmt.Errorf("sample: fetch from %s: %w", name, err)
		}
		n := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				return fmt.Errorf("sample: ack on %s: %w", name, err)
			}
			n++
		}
		got += n
		err = batch.Error()
		// A consumer just made can miss its first pull on a loaded server
		// (no responders): pull again, for a while.
		if n == 0 && errors.Is(err, nats.ErrNoResponders) && time.Now().Before(unheard) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("sample: fetch from %s after %d of %d messages: %w", name, got, count, err)
		}
		if n == 0 {
			return fmt.Errorf("sample: %s had only %d of %d messages to ack", name, got, count)
		}
	}
	return nil
}

// setupCtx bounds the requests that make or change a sample by ctx's
// deadline, or by 2 minutes where ctx has none, instead of the JetStream
// client's default of 5 s per request, which a loaded machine can exceed.
func setupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, 2*time.Minute)
}

// untilHeard runs fn again while it finds no responders, for up to 30 s.
func untilHeard(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitLeader waits, on a cluster, until a just-made replicated stream has a
// leader: until then publishes to it find no responders.
func waitLeader(ctx context.Context, js jetstream.JetStream, name string, c config) error {
	if c.replicas <= 1 {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := js.Stream(ctx, name)
		if err == nil {
			info, ierr := s.Info(ctx)
			if ierr == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				return nil
			}
			err = ierr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sample: stream %s has no leader after 30s (%v), so the sample is incomplete", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
