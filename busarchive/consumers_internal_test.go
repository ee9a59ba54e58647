package busarchive

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestReadSnapshotConsumers: the durable consumers of a snapshot's start,
// in order, with the ack floor the bus would list (the last delivered when
// nothing is pending); an ephemeral one is left out; the reading stops at
// the first message, and a start that does not decode is an error.
func TestReadSnapshotConsumers(t *testing.T) {
	pending := jsonEntry("consumers/p", `{"config":{"durable_name":"p"},"state":{"delivered":{"stream_seq":9},"ack_floor":{"stream_seq":4},"pending":{"5":{"sequence":2,"ts":1}}}}`)
	ephemeral := jsonEntry("consumers/e", `{"config":{"name":"e"},"state":{"delivered":{"stream_seq":3}}}`)
	whole := compress(arcBytes(t, stateEntry(1, 3, 3, 4), consumerEntry("a"), pending, ephemeral, consumerEntry("b"),
		msgEntry(1), msgEntry(2), msgEntry(3), endEntry))
	cs, err := ReadSnapshotConsumers(bytes.NewReader(whole))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Name+"@"+string(rune('0'+c.AckFloor)))
	}
	if strings.Join(got, " ") != "a@2 p@4 b@2" {
		t.Errorf("read %v, want a@2 p@4 b@2", got)
	}
	if !bytes.Equal(cs[0].Config, []byte(`{"durable_name":"a","ack_policy":"explicit"}`)) {
		t.Errorf("a's config reads %s", cs[0].Config)
	}

	// Only the start is read: what follows the consumers is not looked at.
	start := compress(arcBytes(t, stateEntry(1, 3, 3, 1), consumerEntry("a")))
	if cs, err := ReadSnapshotConsumers(bytes.NewReader(append(start, "not s2 at all"...))); err != nil || len(cs) != 1 {
		t.Errorf("a snapshot with garbage after its consumers: %d consumer(s), %v", len(cs), err)
	}
	for name, b := range map[string][]byte{
		"cut in its consumers":   compress(arcBytes(t, stateEntry(1, 3, 3, 2), consumerEntry("a"))),
		"not s2":                 []byte("not a snapshot at all"),
		"a config not an object": compress(arcBytes(t, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":[1],"state":{}}`), msgEntry(1))),
		"no state":               compress(arcBytes(t, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":{"durable_name":"x"}}`), msgEntry(1))),
		"an entry not JSON":      compress(arcBytes(t, stateEntry(1, 1, 1, 1), jsonEntry("consumers/x", `{"config":{"durable_name":"x"},`), msgEntry(1))),
	} {
		if _, err := ReadSnapshotConsumers(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "the snapshot's consumers do not decode") {
			t.Errorf("%s: %v, want the snapshot's consumers do not decode", name, err)
		}
	}
}

// FuzzReadSnapshotConsumers: any bytes give consumers or an error, never a
// panic, and never a consumer whose name nats-keeper would not take.
//
//	go test ./busarchive -run '^$' -fuzz FuzzReadSnapshotConsumers -fuzztime 60s
func FuzzReadSnapshotConsumers(f *testing.F) {
	for _, b := range snapCases(f) {
		if len(b) < 1<<20 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		cs, err := ReadSnapshotConsumers(bytes.NewReader(compress(b)))
		if err != nil {
			return
		}
		for _, c := range cs {
			if !ValidStreamName(c.Name) || len(c.Config) == 0 {
				t.Fatalf("a consumer read as %q with config %q", c.Name, c.Config)
			}
		}
	})
}

// FuzzObjectMembers: on any JSON object without escapes, objectMembers finds
// the members encoding/json finds, byte for byte.
//
//	go test ./busarchive -run '^$' -fuzz FuzzObjectMembers -fuzztime 60s
func FuzzObjectMembers(f *testing.F) {
	f.Add([]byte(`{"config":{"durable_name":"a","x":[1,{"y":"}"}]},"state":{"delivered":{"stream_seq":2}}}`))
	f.Add([]byte(` { "state" : null , "config" : "s,]}" , "config" : [ ] } `))
	f.Add([]byte(`{"other":{"config":1},"config":true}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var m map[string]json.RawMessage
		if bytes.ContainsRune(doc, '\\') || json.Unmarshal(doc, &m) != nil || m == nil {
			return
		}
		a, b := objectMembers(doc, "config", "state")
		if !bytes.Equal(a, m["config"]) || !bytes.Equal(b, m["state"]) {
			t.Fatalf("objectMembers(%s) = %s, %s; encoding/json: %s, %s", doc, a, b, m["config"], m["state"])
		}
	})
}
