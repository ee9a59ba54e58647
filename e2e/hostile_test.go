package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// hostile is one request that must be refused.
type hostile struct {
	name  string
	verb  string
	body  []byte
	codes []int // acceptable codes; the first is the expected one
}

// world is what a refused request must leave as it was: the kept data and
// the shared stream, the streams on the bus, the index (but leases, which a
// changing verb takes and gives back before it refuses), and every file of
// the keeper's directory.
type world struct {
	bus     *sample.Snapshot
	streams []string
	index   map[string]uint64
	files   map[string]fileEntry
}

func observe(t *testing.T, js jetstream.JetStream, dir string) world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := sample.Dump(ctx, js, append(keptStreams("host", "data"), sample.SharedStream)...)
	if err != nil {
		t.Fatal(err)
	}
	w := world{bus: snap, index: map[string]uint64{}, files: listing(t, dir)}
	for name := range js.StreamNames(ctx).Name() {
		w.streams = append(w.streams, name)
	}
	sort.Strings(w.streams)
	kv, err := js.KeyValue(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range indexKeys(t, js) {
		if strings.HasPrefix(k, "lease.") {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s from kept: %v", k, err)
		}
		w.index[k] = e.Revision()
	}
	return w
}

func (a world) diff(b world) string {
	var out []string
	if d := sample.Diff(a.bus, b.bus); d != "" {
		out = append(out, "bus:\n"+d)
	}
	if strings.Join(a.streams, ",") != strings.Join(b.streams, ",") {
		out = append(out, fmt.Sprintf("streams: %v → %v", a.streams, b.streams))
	}
	if fmt.Sprint(a.index) != fmt.Sprint(b.index) {
		out = append(out, fmt.Sprintf("index: %v → %v", a.index, b.index))
	}
	if d := mapDiff(a.files, b.files); d != "" {
		out = append(out, "files:\n"+d)
	}
	return strings.Join(out, "\n")
}

// settled is w as a refusal of c must leave the world before was: as w
// is, but that a restore-kept of a damaged point may have changed the
// modification times of directories. Over live data the keeper verifies
// the point while it sets the live data aside, and a point that fails
// leaves no aside: the aside, never committed, is removed whole, and only
// the times of the directories it lay in show it was begun.
func (w world) settled(c hostile, before world) world {
	if c.verb != "restore-kept" || !strings.HasPrefix(c.name, "damaged point") {
		return w
	}
	files := maps.Clone(w.files)
	for p, e := range files {
		if was, ok := before.files[p]; ok && e.Mode.IsDir() && was.Mode == e.Mode {
			e.MTime = was.MTime
			files[p] = e
		}
	}
	w.files = files
	return w
}

var saysWhatNot = regexp.MustCompile(`\bnothing\b|\bnot\b|\bno\b`)

// checkRefusal checks the code and the sentence of a refused request.
func checkRefusal(t *testing.T, c hostile, r reply) {
	t.Helper()
	if r.Err != nil {
		t.Errorf("%s: %s", c.name, r)
		return
	}
	ok := false
	for _, code := range c.codes {
		ok = ok || r.Code == code
	}
	if !ok {
		t.Errorf("%s %s: got %s, want code %v", c.verb, c.name, r, c.codes)
	}
	switch {
	case r.Said == "":
		t.Errorf("%s %s: refused with no sentence", c.verb, c.name)
	case len(r.Said) > 2048:
		t.Errorf("%s %s: the sentence is %d bytes long, which no one reads: %.300s…", c.verb, c.name, len(r.Said), r.Said)
	case !utf8.ValidString(r.Said) || strings.ContainsAny(r.Said, "\x00\r"):
		t.Errorf("%s %s: the sentence holds invalid UTF-8, NUL or CR: %q", c.verb, c.name, r.Said)
	case !saysWhatNot.MatchString(r.Said):
		t.Errorf("%s %s: the sentence does not say what was not done: %s", c.verb, c.name, r.Said)
	}
}

func jsonBody(v map[string]any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// TestHostileInput sends malformed, malicious and damaging requests to a
// running keeper and checks that each is refused with the right code and a
// clear sentence, and that the bus and the files are untouched.
func TestHostileInput(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(context.Background(), js, "host", "data"); err != nil {
		t.Fatal(err)
	}
	fillBulk(t, js, "host", "data", 2*mib, 7)
	k := startKeeper(t, srv.url(), dir, tmp)
	waitKeepers(t, nc, 1, k)
	mustCall(t, nc, "snapshot-kept", map[string]any{"module": "host", "local": "data", "form": 1, "fingerprint": "good", "caller": "e2e"})
	goodDir := filepath.Join(dir, "points", "host", "data", "f1-good")
	good, err := os.ReadFile(filepath.Join(goodDir, "bus.tar"))
	if err != nil {
		t.Fatal(err)
	}

	// Planted on disk before the first observation: damaged points, a point
	// under another kept data, symlinks, and a copy outside the keeper's dir.
	cases := []hostile{}
	dmg := damages(t, good)
	for name, b := range dmg {
		plantPoint(t, goodDir, dir, "host", "data", name, b)
		req := map[string]any{"module": "host", "local": "data", "form": 1, "fingerprint": name, "caller": "e2e", "why": "hostile"}
		cases = append(cases,
			hostile{"damaged point " + name, "verify-kept", jsonBody(req), []int{500}},
			hostile{"damaged point " + name, "restore-kept", jsonBody(req), []int{500}})
	}
	// A control: re-made by the same tar code but undamaged, it must verify.
	control := plantPoint(t, goodDir, dir, "host", "data", "remade", tartest.Bytes(t, tartest.Entries(t, good)))
	plantPoint(t, goodDir, dir, "other", "data", "good", nil)
	outside := filepath.Join(tmp, "outside", "points", "host", "data", "f1-good")
	plantPoint(t, goodDir, filepath.Join(tmp, "outside"), "host", "data", "good", nil)
	if err := os.Symlink("f1-good", filepath.Join(dir, "points", "host", "data", "f1-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("host", filepath.Join(dir, "points", "hostlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "points", "host", "data", "f1-out")); err != nil {
		t.Fatal(err)
	}

	base := func(extra map[string]any) map[string]any {
		r := map[string]any{"module": "host", "local": "data", "form": 1, "fingerprint": "good", "caller": "e2e", "why": "hostile"}
		for k, v := range extra {
			if v == nil {
				delete(r, k)
			} else {
				r[k] = v
			}
		}
		return r
	}
	restore := func(name string, extra map[string]any, codes ...int) hostile {
		return hostile{name, "restore-kept", jsonBody(base(extra)), codes}
	}

	// Malformed bodies, for every verb.
	bodies := map[string]string{
		"empty body":          ``,
		"truncated object":    `{"module":"host"`,
		"not JSON":            `restore everything please`,
		"an array":            `[{"module":"host"}]`,
		"a string":            `"host"`,
		"null":                `null`,
		"trailing comma":      `{"module":"host",}`,
		"two objects":         `{"module":"host"} {"module":"host"}`,
		"duplicate key":       `{"module":"host","module":"other"}`,
		"key in other case":   `{"Module":"host","local":"data"}`,
		"unknown key":         `{"module":"host","local":"data","surprise":1}`,
		"module a number":     `{"module":3,"local":"data"}`,
		"module an array":     `{"module":["host"],"local":"data"}`,
		"module an object":    `{"module":{"a":1},"local":"data"}`,
		"form a string":       `{"module":"host","local":"data","form":"1","fingerprint":"good"}`,
		"form a fraction":     `{"module":"host","local":"data","form":1.5,"fingerprint":"good"}`,
		"form negative":       `{"module":"host","local":"data","form":-1,"fingerprint":"good"}`,
		"form enormous":       `{"module":"host","local":"data","form":1e300,"fingerprint":"good"}`,
		"aside-only a string": `{"module":"host","local":"data","aside-only":"yes","why":"x"}`,
		"dry-run a number":    `{"module":"host","local":"data","dry-run":1,"why":"x"}`,
		"invalid UTF-8":       "{\"module\":\"ho\xffst\",\"local\":\"data\"}",
		"oversize body":       `{"module":"host","local":"data","why":"` + strings.Repeat("x", 70<<10) + `"}`,
	}
	for _, verb := range []string{"snapshot-kept", "restore-kept", "discard-aside", "list-kept", "verify-kept", "discard-point"} {
		for name, body := range bodies {
			cases = append(cases, hostile{name, verb, []byte(body), []int{400}})
		}
	}

	// Hostile names, in every name field of every verb that takes them.
	names := map[string]string{
		"dot": "a.b", "slash": "a/b", "backslash": `a\b`, "space": "a b", "star": "a*", "gt": "a>",
		"NUL": "a\x00b", "dot-dot": "..", "lone dot": ".", "10,000 characters": strings.Repeat("n", 10000),
		"traversal": "../../etc", "newline": "a\nb",
	}
	for label, n := range names {
		for _, field := range []string{"module", "local", "fingerprint"} {
			for _, verb := range []string{"snapshot-kept", "restore-kept", "verify-kept", "discard-point"} {
				cases = append(cases, hostile{field + " with " + label, verb, jsonBody(base(map[string]any{field: n})), []int{400}})
			}
		}
		cases = append(cases,
			hostile{"module with " + label, "list-kept", jsonBody(map[string]any{"module": n}), []int{400}},
			hostile{"catch-up with " + label, "snapshot-kept", jsonBody(base(map[string]any{"catch-up": n})), []int{400}},
			hostile{"aside id with " + label, "discard-aside", jsonBody(map[string]any{"from": n, "why": "hostile"}), []int{400}})
	}

	// from: outside the keeper's dir, through symlinks, not a point.
	cases = append(cases,
		restore("from /etc", map[string]any{"from": "/etc"}, 400),
		restore("from ../../etc/passwd", map[string]any{"from": "../../etc/passwd"}, 400),
		restore("from a real point outside the dir", map[string]any{"from": outside}, 400),
		restore("from escaping with ..", map[string]any{"from": filepath.Join(dir, "points/host/data/f1-good/../../../../../outside/points/host/data/f1-good")}, 400),
		restore("from the point's bus.tar", map[string]any{"from": filepath.Join(goodDir, "bus.tar")}, 400),
		restore("from the aside dir", map[string]any{"from": filepath.Join(dir, "aside")}, 400),
		restore("from the keeper dir", map[string]any{"from": dir}, 400),
		restore("from 5,000 characters", map[string]any{"from": strings.Repeat("p/", 2500)}, 400),
		restore("from with NUL", map[string]any{"from": "points/host/data/f1-good\x00"}, 400),
		restore("from a symlink to a real point", map[string]any{"from": filepath.Join(dir, "points/host/data/f1-link")}, 400),
		restore("point by name through a symlink", map[string]any{"fingerprint": "link"}, 400),
		restore("from a symlink leaving the dir", map[string]any{"from": filepath.Join(dir, "points/host/data/f1-out")}, 400),
		restore("point by name through a symlink leaving the dir", map[string]any{"fingerprint": "out"}, 400),
		restore("from through a symlinked module dir", map[string]any{"module": "hostlink", "from": filepath.Join(dir, "points/hostlink/data/f1-good")}, 400),
		restore("point by name through a symlinked module dir", map[string]any{"module": "hostlink"}, 400),
		restore("a point of another kept data, by name", map[string]any{"module": "other"}, 400),
		restore("a point of another kept data, by from", map[string]any{"module": "other", "from": filepath.Join(dir, "points/other/data/f1-good")}, 400),
		// point.json says host/data but it lies under other/data: misplaced.
		restore("a misplaced point, by from", map[string]any{"from": filepath.Join(dir, "points/other/data/f1-good")}, 400, 500),
		restore("a point that is not there", map[string]any{"fingerprint": "nope"}, 404),
		restore("no why", map[string]any{"why": nil}, 400),
		hostile{"a point of another kept data", "verify-kept", jsonBody(base(map[string]any{"module": "other"})), []int{400}},
		hostile{"through a symlink", "verify-kept", jsonBody(base(map[string]any{"fingerprint": "link"})), []int{400}},
		hostile{"kept data that is not on the bus", "snapshot-kept", jsonBody(base(map[string]any{"module": "nobody", "fingerprint": "x"})), []int{404}},
	)
	for _, id := range []string{"../points/host/data/f1-good", "host.data.x/../../../etc", "/etc/passwd", "host.data", "host.data.t.u",
		"host.data.20990101T000000/../../points", "host.data.20990101T000000\x00"} {
		cases = append(cases, hostile{"aside id " + id, "discard-aside", jsonBody(map[string]any{"from": id, "why": "hostile"}), []int{400}})
	}
	cases = append(cases,
		hostile{"an aside that is not there", "discard-aside", jsonBody(map[string]any{"from": "host.data.20990101T000000", "why": "hostile"}), []int{404}},
		hostile{"no why", "discard-aside", jsonBody(map[string]any{"from": "host.data.20990101T000000"}), []int{400}},
		hostile{"a point that is not there", "discard-point", jsonBody(base(map[string]any{"fingerprint": "never-taken"})), []int{404}},
		hostile{"no why", "discard-point", jsonBody(base(map[string]any{"why": nil})), []int{400}},
		hostile{"a from", "discard-point", jsonBody(base(map[string]any{"from": "points/host/data/f1-good"})), []int{400}})

	// The control point verifies (so the damaged ones fail for their damage).
	if r := call(context.Background(), nc, "verify-kept", jsonBody(base(map[string]any{"fingerprint": "remade"})), time.Minute); r.Code != 200 {
		t.Fatalf("the re-made, undamaged point %s does not verify: %s", control, r)
	}

	before := observe(t, js, dir)
	for _, c := range cases {
		r := call(context.Background(), nc, c.verb, c.body, 2*time.Minute)
		checkRefusal(t, c, r)
		after := observe(t, js, dir)
		if d := before.diff(after.settled(c, before)); d != "" {
			t.Errorf("%s %s (%s) changed things:\n%s", c.verb, c.name, r, d)
		}
		before = after
	}
	t.Logf("%d hostile requests refused", len(cases))

	// A few through the nats CLI, as an operator would send them.
	natsCLI := tools.NatsCLI(t)
	for _, c := range []hostile{
		{"not JSON", "restore-kept", []byte(`{"module":`), []int{400}},
		{"traversal in from", "restore-kept", jsonBody(base(map[string]any{"from": "../../../etc"})), []int{400}},
		{"space in module", "snapshot-kept", jsonBody(base(map[string]any{"module": "a b"})), []int{400}},
		{"damaged point", "restore-kept", jsonBody(base(map[string]any{"fingerprint": "flipped-byte"})), []int{500}},
	} {
		cmd := exec.Command(natsCLI, "--server", srv.url(), "--timeout", "1m", "request", "--raw", "--no-templates",
			"mesh-broker."+c.verb, string(c.body))
		cmd.Env = cleanEnv(tmp)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("nats request %s %s: %v\n%s", c.verb, c.body, err, out)
			continue
		}
		var m struct {
			Code  int    `json:"code"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &m); err != nil {
			t.Errorf("nats request %s %s: the output %q is not the error body: %v", c.verb, c.name, out, err)
			continue
		}
		checkRefusal(t, c, reply{Code: m.Code, Said: m.Error})
		after := observe(t, js, dir)
		if d := before.diff(after.settled(c, before)); d != "" {
			t.Errorf("the request %s %s through the nats CLI changed things:\n%s", c.verb, c.name, d)
		}
		before = after
	}
	// A name the contract allows but NATS KV keys do not (non-ASCII): the
	// keeper must answer it as a request, not fail inside the index.
	for _, verb := range []string{"list-kept", "verify-kept"} {
		r := call(context.Background(), nc, verb, jsonBody(base(map[string]any{"module": "café", "form": 1, "fingerprint": "good"})), time.Minute)
		if r.Err != nil || r.Code == 500 {
			t.Errorf("%s of module café: %s; want an answer (400 refused, 404 not found or a listing), not a failure inside the keeper", verb, r)
		}
	}
	if k.p.done() {
		t.Fatalf("the keeper exited: %v\n%s", k.p.err, tail(k.p.log.String()))
	}
}
