package kept

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// wireSample is a reply holding every type with renamed keys, each key set.
func wireSample() *Reply {
	floor := uint64(6)
	objects := uint64(2)
	positions := []Position{{Stream: "S", Consumer: "c", AckFloor: 7, Config: json.RawMessage(`{"durable_name":"c","ack_policy":"explicit"}`)}}
	sums := []StreamSum{{Name: "S", Messages: 9, Bytes: 99, FirstSeq: 1, LastSeq: 9, Consumers: 1}}
	return &Reply{
		Said: "done.",
		Point: &Point{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f", Dir: "points/billing/ledger/f3-f",
			Streams: sums, Positions: positions, PositionCount: 1, ArchiveSize: 10240, ArchiveSum: "abc",
			Sealing: Sealing{Archive: "bus.tar.age", Encrypted: &Encryption{Format: "age", Recipients: []string{"age1x"}, PlainSize: 10000}}},
		Aside: &Aside{ID: "billing.ledger.20261201T180000", Module: "billing", Local: "ledger", Reason: "restore",
			Dir: "aside/billing.ledger.20261201T180000", Streams: sums, Positions: positions, PositionCount: 1, ArchiveSize: 2048, ArchiveSum: "def"},
		Positions:  positions,
		Totals:     []KeptTotal{{Module: "billing", Local: "ledger", Points: 1, PointBytes: 10240, Asides: 1, AsideBytes: 2048}},
		TotalBytes: 12288,
		Evidence: &Evidence{Verdict: Pass, Module: "billing", Local: "ledger", PointSum: "abc", Checks: []Check{
			{Name: CheckPointVerified, Verdict: Pass, Archive: &ArchiveFigures{Size: 10240, BytesChecked: 9000, Streams: 1}},
			{Name: CheckStreams, Verdict: Pass, Streams: []StreamFigures{{Stream: "S", Verdict: Pass,
				Want: &StreamCount{Messages: 9, FirstSeq: 1, LastSeq: 9}, Got: &StreamCount{Messages: 9, FirstSeq: 1, LastSeq: 9},
				Count: &SubjectFigures{Want: 3, Got: 3, Objects: &objects, Chunks: &objects}}}},
			{Name: CheckConsumers, Verdict: Pass, Consumers: []ConsumerFigures{{Stream: "S", Consumer: "c", By: MoveReset, Verdict: Pass,
				WantFloor: 6, GotFloor: &floor, WantConfig: "a", GotConfig: "a"}}},
		}},
	}
}

// renamedKeys are the new keys with an old name, at every depth of v's
// JSON, the old name by the new.
var renamedKeys = map[string]string{
	"total-bytes": "total_bytes", "point-bytes": "point_bytes", "aside-bytes": "aside_bytes", "ack-floor": "ack_floor",
	"first-seq": "first_seq", "last-seq": "last_seq", "position-count": "position_count", "archive-size": "archive_size",
	"archive-sum": "archive_sum", "plain-size": "plain_size", "point-sum": "point_sum", "bytes-checked": "bytes_checked",
	"want-subjects": "want_subjects", "got-subjects": "got_subjects", "chunk-subjects": "chunk_subjects",
	"want-ack-floor": "want_ack_floor", "got-ack-floor": "got_ack_floor", "want-config": "want_config", "got-config": "got_config",
	"streams-done": "streams_done", "streams-total": "streams_total", "bytes-total": "bytes_total",
}

// walkKeys calls fn with every object of the JSON v, except what a
// position's config holds (the server's own keys).
func walkKeys(v any, fn func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		fn(v)
		for k, x := range v {
			if k != "config" {
				walkKeys(x, fn)
			}
		}
	case []any:
		for _, x := range v {
			walkKeys(x, fn)
		}
	}
}

// generic is data decoded into maps, numbers kept as written.
func generic(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return v
}

// oldCasing is data with the new keys of renamedKeys left out wherever their
// old key is there: what a keeper of the release before wrote.
func oldCasing(t testing.TB, data []byte) []byte {
	t.Helper()
	v := generic(t, data)
	walkKeys(v, func(m map[string]any) {
		for k := range m {
			if old, ok := renamedKeys[k]; ok {
				if _, has := m[old]; has {
					delete(m, k)
				}
			}
		}
	})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonical is data with its keys sorted, to compare two JSON texts.
func canonical(t testing.TB, data []byte) string {
	t.Helper()
	b, err := json.Marshal(generic(t, data))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every renamed key of a reply (and of the point, aside, totals, positions
// and evidence in it) is written under its new name and, right after it,
// under its old one with the same value.
func TestWireRepliesCarryNewAndOldKeys(t *testing.T) {
	data, err := json.Marshal(wireSample())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	walkKeys(generic(t, data), func(m map[string]any) {
		for k, v := range m {
			if strings.Contains(k, "_") {
				if _, ok := m[strings.ReplaceAll(k, "_", "-")]; !ok {
					t.Errorf("the old key %q has no new one beside it in %v", k, m)
				}
			}
			old, ok := renamedKeys[k]
			if !ok {
				continue
			}
			seen[k] = true
			if ov, has := m[old]; !has || !reflect.DeepEqual(ov, v) {
				t.Errorf("%q is %v but %q is %v", k, v, old, ov)
			}
		}
	})
	for k := range renamedKeys {
		if !seen[k] && !strings.HasPrefix(k, "streams-") && k != "bytes-total" {
			t.Errorf("the sample reply holds no %q", k)
		}
	}
	for _, pair := range []string{`"archive-size":10240,"archive_size":10240`, `"ack-floor":7,"ack_floor":7`, `"total-bytes":12288,"total_bytes":12288`} {
		if !bytes.Contains(data, []byte(pair)) {
			t.Errorf("the reply does not hold %s: %s", pair, data)
		}
	}
	var pr Progress
	pb, _ := json.Marshal(Progress{Verb: "snapshot-kept", StreamsDone: 1, StreamsTotal: 2, Bytes: 3, BytesTotal: 4})
	if err := json.Unmarshal(oldCasing(t, pb), &pr); err != nil || pr.StreamsDone != 1 || pr.StreamsTotal != 2 || pr.BytesTotal != 4 {
		t.Errorf("progress in the old casing read as %+v (%v) from %s", pr, err, oldCasing(t, pb))
	}
	if !bytes.Contains(pb, []byte(`"streams-done":1,"streams_done":1`)) {
		t.Errorf("progress: %s", pb)
	}
}

// What a keeper of the release before wrote (old keys only) reads as what
// this one writes: replies, records, evidence.
func TestWireOldKeysRead(t *testing.T) {
	now, _ := json.Marshal(wireSample())
	old := oldCasing(t, now)
	if bytes.Contains(old, []byte(`"archive-size"`)) || !bytes.Contains(old, []byte(`"archive_size"`)) {
		t.Fatalf("the old casing is not: %s", old)
	}
	var got Reply
	if err := json.Unmarshal(old, &got); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&got)
	if canonical(t, again) != canonical(t, now) {
		t.Fatalf("read from the old casing:\n%s\nwant\n%s", again, now)
	}
	ev, err := DecodeEvidence(oldCasing(t, mustJSON(t, wireSample().Evidence)))
	if err != nil || ev.Checks[2].Consumers[0].WantFloor != 6 || ev.PointSum != "abc" {
		t.Fatalf("evidence in the old casing: %+v, %v", ev, err)
	}
	var p Point
	if err := json.Unmarshal(old, &struct {
		Point *Point `json:"point"`
	}{&p}); err != nil || p.ArchiveSize != 10240 || p.Positions[0].AckFloor != 7 || p.Encrypted.PlainSize != 10000 {
		t.Fatalf("point in the old casing: %+v, %v", p, err)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Given both keys, the new one is read; an old key is matched, as
// encoding/json matches keys, without regard to case, and may be escaped.
func TestWireNewKeyWins(t *testing.T) {
	for _, c := range []struct {
		body string
		want int64
	}{
		{`{"archive-size":1,"archive_size":2}`, 1},
		{`{"archive_size":2,"archive-size":1}`, 1},
		{`{"Archive-Size":1,"archive_size":2}`, 1},
		{`{"archive_size":2}`, 2},
		{`{"ARCHIVE_SIZE":2}`, 2},
		{`{"archive\u005fsize":2}`, 2},
		{" {\n  \"archive_size\" : 2 ,\n \"dir\": \"x\"\n}\n", 2},
		{`{"archive_size":2,"archive_size":3}`, 3},
		{`{}`, 0},
	} {
		var p Point
		if err := json.Unmarshal([]byte(c.body), &p); err != nil || p.ArchiveSize != c.want {
			t.Errorf("%s: archive size %d (%v), want %d", c.body, p.ArchiveSize, err, c.want)
		}
	}
	for _, bad := range []string{`{"archive_size":"x"}`, `{"archive_size":1`, `[1]`, `{"archive_size":1}}`} {
		var p Point
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s was read as %+v", bad, p)
		}
	}
}

// positionSize is len(json.Marshal) of a position, with both keys of its
// ack floor.
func TestWirePositionSize(t *testing.T) {
	for _, p := range []Position{
		{Stream: "S", Consumer: "c", AckFloor: 0},
		{Stream: "S", Consumer: "c", AckFloor: 1234567890123, Config: json.RawMessage(`{"durable_name":"c"}`)},
		{Stream: "S<", Consumer: "c\"", AckFloor: 12, Config: json.RawMessage(`{ "a" : 1 }`)},
	} {
		if got, want := PositionSize(p), len(mustJSON(t, p)); got != want {
			t.Errorf("PositionSize(%+v) = %d, json.Marshal %d", p, got, want)
		}
	}
}

// DecodeEvidence stays strict at every depth: a key neither new nor old is
// refused, as DisallowUnknownFields refused it.
func TestWireEvidenceStrict(t *testing.T) {
	good := string(mustJSON(t, wireSample().Evidence))
	if _, err := DecodeEvidence([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{`"want-ack-floor":6`, `"want-ack-floorx":6`},
		{`"bytes-checked":9000`, `"bytes-checked":9000,"surprise":1`},
		{`"first-seq":1`, `"first-seq":1,"first-sequence":1`},
		{`"point-sum":"abc"`, `"point-sum":"abc","pointsum":"x"`},
	} {
		bad := strings.Replace(good, c.from, c.to, 1)
		if bad == good {
			t.Fatalf("%s is not in %s", c.from, good)
		}
		if _, err := DecodeEvidence([]byte(bad)); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v", c.to, err)
		}
	}
}

// Every JSON key of the package's named types is kebab-case (or one word);
// a type with an old key in a was tag has its twin and methods in
// wiretypes.go.
func TestWireTypesHaveMethods(t *testing.T) {
	withMethods := map[string]reflect.Type{}
	for _, v := range []any{Reply{}, KeptTotal{}, Position{}, StreamSum{}, Point{}, Aside{}, Encryption{}, Evidence{},
		ArchiveFigures{}, StreamCount{}, SubjectFigures{}, ConsumerFigures{}, Progress{}} {
		typ := reflect.TypeOf(v)
		withMethods[typ.Name()] = typ
		if !typ.Implements(reflect.TypeFor[json.Marshaler]()) || !reflect.PointerTo(typ).Implements(unmarshalerType) {
			t.Errorf("%s has no MarshalJSON and UnmarshalJSON", typ)
		}
	}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false // the anonymous structs inside functions decode others' JSON (the server's)
			}
			for _, f := range st.Fields.List {
				if f.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(f.Tag.Value)
				key, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if strings.Contains(key, "_") {
					t.Errorf("%s: %s's key %q is not kebab-case", fset.Position(f.Pos()), ts.Name, key)
				}
				if reflect.StructTag(tag).Get("was") != "" && withMethods[ts.Name.Name] == nil {
					t.Errorf("%s: %s has an old key but no twin and methods in wiretypes.go", fset.Position(f.Pos()), ts.Name)
				}
			}
			return false
		})
	}
}

// A reply too big for the bound is cut as before: replySize measures it as
// json.Marshal writes it, both keys included.
func TestWireReplySize(t *testing.T) {
	rep := wireSample()
	for i := range 50 {
		rep.Positions = append(rep.Positions, Position{Stream: "S", Consumer: "c" + strconv.Itoa(i), AckFloor: uint64(i) * 1000,
			Config: json.RawMessage(`{"durable_name":"c","ack_policy":"explicit"}`)})
	}
	rep.Point.Positions = rep.Positions
	size, err := ReplySize(rep)
	if err != nil || size != len(mustJSON(t, rep)) {
		t.Fatalf("replySize %d (%v), json.Marshal %d", size, err, len(mustJSON(t, rep)))
	}
	cut := BoundReply("snapshot-kept", rep, size/2)
	if cut.Cut == nil || len(mustJSON(t, cut)) > size/2 {
		t.Fatalf("cut to %d bytes: %v", len(mustJSON(t, cut)), cut.Cut)
	}
}

// FuzzWireCase: whatever JSON a reply is read from, it reads the same in the
// new casing, in the old (what a keeper of the release before writes), and
// in both; and written again it carries each renamed key under both names.
func FuzzWireCase(f *testing.F) {
	now := mustJSON(f, wireSample())
	f.Add(now)
	f.Add(oldCasing(f, now))
	f.Add([]byte(`{"said":"x","total_bytes":1,"total-bytes":2,"point":{"archive_size":3,"Archive-Size":4,"positions":[{"ack_floor":1,"config":{"ack_floor":2}}]}}`))
	f.Add([]byte(`{"said":"x","evidence":{"checks":[{"consumers":[{"want_ack_floor":1,"got_ack_floor":null}]}]},"totals":[{"point_bytes":1}]}`))
	f.Add([]byte(`{"points":[{"streams":[{"first_seq":1,"last-seq":2}],"encrypted":{"plain_size":3}}],"asides":[{"archive\u005fsum":"x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Reply
		if json.Unmarshal(data, &r) != nil {
			return
		}
		out, err := json.Marshal(&r)
		if err != nil {
			t.Fatalf("a reply read does not encode: %v", err)
		}
		var back Reply
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("a reply written is not read: %v\n%s", err, out)
		}
		if again := mustJSON(t, &back); !bytes.Equal(again, out) {
			t.Fatalf("written again differently:\n%s\n%s", out, again)
		}
		walkKeys(generic(t, out), func(m map[string]any) {
			for k, v := range m {
				if old, ok := renamedKeys[k]; ok && !reflect.DeepEqual(m[old], v) {
					t.Fatalf("%q is %v, %q %v", k, v, old, m[old])
				}
			}
		})
		var fromOld Reply
		if err := json.Unmarshal(oldCasing(t, out), &fromOld); err != nil {
			t.Fatalf("the old casing is not read: %v", err)
		}
		if a, b := canonical(t, mustJSON(t, &fromOld)), canonical(t, out); a != b {
			t.Fatalf("the old casing reads differently:\n%s\n%s", a, b)
		}
	})
}
