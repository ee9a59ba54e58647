package jsbus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestEvidenceReads: Consumer reads one durable's ack floor and
// configuration as Consumers lists it; SubjectCount counts the subjects
// under a filter without listing them (past 100,000, where the server
// pages its subject details, too); Stream gives the stream's subject count.
func TestEvidenceReads(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	obs, err := b.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "files"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := obs.PutString(ctx, fmt.Sprintf("f%d", i), strings.Repeat("x", 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := obs.Delete(ctx, "f0"); err != nil {
		t.Fatal(err)
	}
	for filter, want := range map[string]uint64{"$O.files.M.>": 3, "$O.files.C.>": 2, ">": 5, "nothing.>": 0} {
		got, err := b.a.SubjectCount(ctx, "OBJ_files", filter)
		if err != nil || got != want {
			t.Errorf("SubjectCount %s: %d, %v; want %d", filter, got, err, want)
		}
	}
	if si, err := b.a.Stream(ctx, "OBJ_files"); err != nil || si.NumSubjects != 5 {
		t.Errorf("Stream: %+v, %v; want 5 subjects", si, err)
	}
	if _, err := b.a.SubjectCount(ctx, "NOPE", ">"); !errors.Is(err, keeper.ErrNoStream) {
		t.Errorf("SubjectCount of no stream: %v", err)
	}

	// Many subjects: the count is the server's, the reply stays small.
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "MANY", Subjects: []string{"many.>"}}); err != nil {
		t.Fatal(err)
	}
	const many = 100_050
	for i := range many {
		if _, err := b.js.PublishAsync(fmt.Sprintf("many.%d", i), nil, jetstream.WithStallWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 || i == many-1 {
			select {
			case <-b.js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	if got, err := b.a.SubjectCount(ctx, "MANY", "many.>"); err != nil || got != many {
		t.Errorf("SubjectCount of %d subjects: %d, %v", many, got, err)
	}

	if _, err := b.js.CreateOrUpdateConsumer(ctx, "MANY", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	p, err := b.a.Consumer(ctx, "MANY", "d")
	if err != nil || p.Stream != "MANY" || p.Consumer != "d" || p.AckFloor != 0 || !strings.Contains(string(p.Config), `"durable_name":"d"`) {
		t.Fatalf("Consumer: %+v, %v", p, err)
	}
	// The same configuration as the list's, but for the server's own
	// metadata, which a consumer info adds to (_nats.ver, _nats.level).
	all, err := everyConsumer(ctx, b.a)
	if err != nil || len(all) != 1 || all[0].AckFloor != p.AckFloor || withoutMetadata(t, all[0].Config) != withoutMetadata(t, p.Config) {
		t.Errorf("Consumers lists %s, Consumer read %s (%v)", all[0].Config, p.Config, err)
	}
	if _, err := b.a.Consumer(ctx, "MANY", "none"); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("Consumer of no consumer: %v", err)
	}
	if _, err := b.a.Consumer(ctx, "NOPE", "d"); !errors.Is(err, keeper.ErrNoStream) {
		t.Errorf("Consumer on no stream: %v", err)
	}
}

// withoutMetadata is a configuration without its metadata, keys sorted.
func withoutMetadata(t *testing.T, raw []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "metadata")
	out, _ := json.Marshal(m)
	return string(out)
}
