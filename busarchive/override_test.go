package busarchive_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/jsm.go/api"
	"github.com/nats-io/jsm.go/backup"
	"github.com/nats-io/nats-server/v2/server/archive"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// A snapshot with consumers of replicas 3, none of their own and 1, capped
// at 1: the first is lowered to 1, the others are left as they were, and
// every other entry (state, messages, the end) is byte for byte the same.
func TestCapConsumerReplicas(t *testing.T) {
	var in bytes.Buffer
	enc := backup.NewEncoder(&in)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	if err := enc.WriteState(ts, api.StreamState{Msgs: 3, FirstSeq: 1, LastSeq: 3, Consumers: 3}); err != nil {
		t.Fatal(err)
	}
	for name, replicas := range map[string]string{"three": `,"num_replicas":3`, "own": ``, "one": `,"num_replicas":1`} {
		data := fmt.Sprintf(`{"config":{"durable_name":%q,"ack_policy":"explicit","description":"a<b"%s},"state":{"ack_floor":{"stream_seq":2}}}`, name, replicas)
		if err := enc.WriteConsumer(name, ts, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		body := bytes.Repeat([]byte{byte(seq)}, 1000*int(seq))
		if err := enc.WriteMessage(&backup.Message{Subject: "m.x", Seq: seq, Ts: ts, HdrSize: 10, PayloadSize: int64(len(body)) - 10, Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.WriteEnd(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(busarchive.CapConsumerReplicas(bytes.NewReader(in.Bytes()), 1))
	if err != nil {
		t.Fatal(err)
	}
	before, after := entries(t, in.Bytes()), entries(t, out)
	if len(before) != len(after) {
		t.Fatalf("%d entries in, %d out", len(before), len(after))
	}
	for i := range before {
		b, a := before[i], after[i]
		if b.hdr.Name != a.hdr.Name || b.hdr.Sequence != a.hdr.Sequence || b.hdr.Timestamp != a.hdr.Timestamp {
			t.Fatalf("entry %d: %+v in, %+v out", i, b.hdr, a.hdr)
		}
		if !strings.HasPrefix(b.hdr.Name, "consumers/") {
			if b.hdr != a.hdr || !bytes.Equal(b.data, a.data) {
				t.Errorf("entry %d (%s) changed: %+v in, %+v out", i, b.hdr.Name, b.hdr, a.hdr)
			}
			continue
		}
		var doc struct {
			Config map[string]any `json:"config"`
			State  map[string]any `json:"state"`
		}
		if err := json.Unmarshal(a.data, &doc); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"consumers/three": 1.0, "consumers/one": 1.0, "consumers/own": nil}[a.hdr.Name]
		if got := doc.Config["num_replicas"]; got != want || doc.Config["description"] != "a<b" || doc.State == nil {
			t.Errorf("%s out: replicas %v (want %v), config %v, state %v", a.hdr.Name, got, want, doc.Config, doc.State)
		}
		if a.hdr.Name != "consumers/three" && !bytes.Equal(b.data, a.data) {
			t.Errorf("%s was changed: %s", a.hdr.Name, a.data)
		}
	}
	// Damage fails the read with a sentence.
	_, err = io.ReadAll(busarchive.CapConsumerReplicas(bytes.NewReader(in.Bytes()[:in.Len()/2]), 1))
	if err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Errorf("a cut snapshot: %v", err)
	}
}

type entry struct {
	hdr  archive.Header
	data []byte
}

func entries(t *testing.T, arc []byte) []entry {
	t.Helper()
	r := archive.NewReader(s2.NewReader(bytes.NewReader(arc)))
	var out []entry
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{*h, b})
	}
}

func TestOverrideConfig(t *testing.T) {
	meta := []byte(`{"config":{"name":"S","num_replicas":3,"placement":{"cluster":"east","tags":["ssd"]},"subjects":["s.>"]},"state":{"messages":4}}`)
	got, err := busarchive.OverrideConfig(meta, 1, "west", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"config":{"name":"S","num_replicas":1,"placement":{"cluster":"west","tags":["a","b"]},"subjects":["s.>"]},"state":{"messages":4}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if same, _ := busarchive.OverrideConfig(meta, 0, "", nil); !bytes.Equal(compact(t, same), compact(t, meta)) {
		t.Errorf("no overrides changed backup.json: %s", same)
	}
	if n, err := busarchive.ConfigReplicas(meta); n != 3 || err != nil {
		t.Errorf("ConfigReplicas: %d, %v", n, err)
	}
	if _, err := busarchive.OverrideConfig([]byte(`{"state":{}}`), 1, "", nil); err == nil {
		t.Error("backup.json without a config was taken")
	}
}

func compact(t *testing.T, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return out
}

// TestCapConsumerReplicasLeavesNoGoroutine: a cap that ends early (its
// reader closed after a few bytes, or a snapshot that stops decoding)
// leaves no compressor goroutine behind, with its blocks.
func TestCapConsumerReplicasLeavesNoGoroutine(t *testing.T) {
	var in bytes.Buffer
	enc := backup.NewEncoder(&in)
	if err := enc.WriteState(1, api.StreamState{Msgs: 200, FirstSeq: 1, LastSeq: 200}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 64<<10)
	for seq := uint64(1); seq <= 200; seq++ {
		r := rand.New(rand.NewPCG(seq, 1))
		for j := range body {
			body[j] = byte(r.Uint32())
		}
		if err := enc.WriteMessage(&backup.Message{Subject: "m.x", Seq: seq, Ts: 1, PayloadSize: int64(len(body)), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.WriteEnd(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	whole := in.Bytes()
	compressors := func() int {
		var b strings.Builder
		if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
			t.Fatal(err)
		}
		return strings.Count(b.String(), "s2.(*Writer).Reset")
	}
	before := compressors()
	for i := range 3 {
		// Closed after its first bytes: the compressor's writes fail.
		rc := busarchive.CapConsumerReplicas(bytes.NewReader(whole), 1)
		if _, err := io.ReadFull(rc, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		// Cut in the middle: the snapshot stops decoding.
		if _, err := io.ReadAll(busarchive.CapConsumerReplicas(bytes.NewReader(whole[:len(whole)/2]), 1)); err == nil {
			t.Fatalf("round %d: a snapshot cut in half was capped without an error", i)
		}
	}
	for wait := 0; compressors() > before; wait++ {
		if wait == 100 {
			t.Fatalf("%d compressor goroutines are left after caps that ended early (%d before)", compressors(), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
