package busarchive

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// arcItem is one entry of a NATSARC1 stream as the server's reader finds it.
type arcItem struct {
	hdr  archive.Header
	data []byte
}

// readItems lists the entries of the s2 stream b, and the error that
// stopped the server's reader (nil at its end).
func readItems(b []byte) ([]arcItem, error) {
	r := archive.NewReader(s2.NewReader(bytes.NewReader(b)))
	var out []arcItem
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		data, err := io.ReadAll(io.LimitReader(r, 16<<20))
		if err != nil {
			return out, err
		}
		out = append(out, arcItem{*h, data})
	}
}

// withoutReplicas is a consumer entry decoded, its config's num_replicas
// taken out, and the replicas it named.
func withoutReplicas(t *testing.T, entry []byte) (any, any) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(entry, &doc); err != nil {
		t.Fatalf("a consumer entry out does not decode: %v\n%s", err, entry)
	}
	cfg, _ := doc["config"].(map[string]any)
	n := cfg["num_replicas"]
	delete(cfg, "num_replicas")
	return doc, n
}

// FuzzCapConsumerReplicas: a restore with --replicas rewrites the snapshot
// of a point (perhaps imported from a natscli backup) as it streams to the
// server. Whatever the snapshot, it never panics (it runs in a goroutine of
// its own, so a panic would end the keeper); a snapshot the server's reader
// does not read to its end fails the read; and what it hands out holds the
// same entries in the same order, every byte of each the same, but a
// consumer whose num_replicas was over the cap, which then names the cap
// and is otherwise the same JSON. b[0] odd: b[1:] is the s2 stream; even:
// b[1:] is the NATSARC1 archive, compressed here.
//
//	go test ./busarchive -run '^$' -fuzz FuzzCapConsumerReplicas -fuzztime 60s
func FuzzCapConsumerReplicas(f *testing.F) {
	capped := jsonEntry("consumers/c3", `{"config":{"durable_name":"c3","num_replicas":3,"description":"a<b"},"state":{}}`)
	own := jsonEntry("consumers/c0", `{"config":{"durable_name":"c0"},"state":{}}`)
	for _, b := range [][]byte{
		arcBytes(f, stateEntry(1, 2, 2, 2), capped, own, msgEntry(1), msgEntry(2), endEntry),
		arcBytes(f, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":{"num_replicas":"3"}}`), msgEntry(1), endEntry),
		arcBytes(f, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":null}`), endEntry),
		arcBytes(f, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":{"num_replicas":5},"config":{"num_replicas":1}}`), endEntry),
		arcBytes(f, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":{"num_replicas":2.0}}`), endEntry),
	} {
		f.Add(append([]byte{0}, b...), uint8(1))
	}
	f.Add(append([]byte{1}, compress(arcBytes(f, stateEntry(1, 1, 1, 1), capped, msgEntry(1), endEntry))...), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, most uint8) {
		if len(b) == 0 || len(b) > 1<<20 {
			return
		}
		s := b[1:]
		if b[0]%2 == 0 {
			s = compress(s)
		}
		limit := int(most%5) + 1 // what a restore's replicas may be
		out, err := io.ReadAll(CapConsumerReplicas(bytes.NewReader(s), limit))
		in, inErr := readItems(s)
		if inErr != nil {
			if err == nil {
				t.Fatalf("a snapshot the server's reader stops in (%v) was handed out whole", inErr)
			}
			return
		}
		if err != nil {
			for _, it := range in {
				if strings.HasPrefix(it.hdr.Name, "consumers/") {
					if _, cerr := capConsumer(it.data, limit); cerr != nil || it.hdr.HeaderSize+it.hdr.PayloadSize > maxConsumerEntry {
						return // a consumer entry it cannot rewrite: refused
					}
				}
			}
			t.Fatalf("a snapshot whose every consumer can be rewritten failed: %v", err)
		}
		got, gerr := readItems(out)
		if gerr != nil || len(got) != len(in) {
			t.Fatalf("%d entries in, %d out (%v)", len(in), len(got), gerr)
		}
		for i, a := range in {
			g := got[i]
			if g.hdr.Name != a.hdr.Name || g.hdr.Sequence != a.hdr.Sequence || g.hdr.Timestamp != a.hdr.Timestamp {
				t.Fatalf("entry %d: %+v in, %+v out", i, a.hdr, g.hdr)
			}
			if g.hdr == a.hdr && bytes.Equal(g.data, a.data) {
				continue
			}
			if !strings.HasPrefix(a.hdr.Name, "consumers/") {
				t.Fatalf("entry %d (%q) changed", i, a.hdr.Name)
			}
			var n int
			before, raw := withoutReplicas(t, a.data)
			if raw == nil || json.Unmarshal(mustJSON(t, raw), &n) != nil || n <= limit {
				t.Fatalf("consumer entry %q of %v replicas, cap %d, was changed:\n%s\n%s", a.hdr.Name, raw, limit, a.data, g.data)
			}
			after, now := withoutReplicas(t, g.data)
			if now != float64(limit) || !reflect.DeepEqual(before, after) {
				t.Fatalf("consumer entry %q, capped at %d, became other JSON:\n%s\n%s", a.hdr.Name, limit, a.data, g.data)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzOverrideConfig: backup.json of a point (perhaps imported) with a
// restore's overrides. What it hands back is JSON whose stream config names
// the overrides given and is otherwise the config that was there, every
// other key the same; a backup.json without a config object is refused.
func FuzzOverrideConfig(f *testing.F) {
	f.Add([]byte(`{"config":{"name":"S","num_replicas":3,"placement":{"cluster":"east","tags":["ssd"]},"subjects":["s.>"]},"state":{"messages":4}}`), uint8(1), "west", "a,b")
	f.Add([]byte(`{"config":{"name":"S"},"config":null}`), uint8(0), "", "")
	f.Add([]byte(`{"config":{"name":"S\u003c","description":"a<b&c"},"x":[1,2.50,"\u00e9"]}`), uint8(2), "", "")
	f.Add([]byte(`{"state":{}}`), uint8(1), "", "")
	f.Fuzz(func(t *testing.T, meta []byte, replicas uint8, cluster, tagList string) {
		var tags []string
		if tagList != "" {
			tags = strings.Split(tagList, ",")
		}
		r := int(replicas % 6)
		out, err := OverrideConfig(meta, r, cluster, tags)
		var in map[string]any
		if json.Unmarshal(meta, &in) != nil {
			if err == nil {
				t.Fatal("a backup.json that does not decode was taken")
			}
			return
		}
		inCfg, ok := in["config"].(map[string]any)
		if !ok {
			if err == nil {
				t.Fatalf("a backup.json without a config object was taken: %s", meta)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused %s: %v", meta, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("the result does not decode: %v\n%s", err, out)
		}
		gotCfg, _ := got["config"].(map[string]any)
		if r > 0 {
			if gotCfg["num_replicas"] != float64(r) {
				t.Fatalf("replicas %d: the config names %v", r, gotCfg["num_replicas"])
			}
			inCfg["num_replicas"] = float64(r)
		}
		if cluster != "" || len(tags) > 0 {
			var want map[string]any
			json.Unmarshal(mustJSON(t, struct {
				Cluster string   `json:"cluster,omitempty"`
				Tags    []string `json:"tags,omitempty"`
			}{cluster, tags}), &want)
			if !reflect.DeepEqual(gotCfg["placement"], any(want)) {
				t.Fatalf("placement %q %q: the config names %v", cluster, tags, gotCfg["placement"])
			}
			inCfg["placement"] = gotCfg["placement"]
		}
		if in["config"] = inCfg; !reflect.DeepEqual(in, got) {
			t.Fatalf("more than the overrides changed:\n%s\n%s", meta, out)
		}
	})
}
