package busarchive

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The golden archive's manifest, read and written again, is the very same
// bytes: the seal still matches, and nothing of the recorded configuration
// is lost or re-rendered.
func TestManifestRoundTripsByteForByte(t *testing.T) {
	a, c, err := OpenFile(filepath.Join("..", "testdata", "busarchive", "format1", "bus.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := sealManifest(a.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, a.raw) {
		t.Fatalf("the manifest written again differs from the one read:\n%s\nwas\n%s", b, a.raw)
	}
	for _, s := range a.Manifest().Streams {
		// The configuration the manifest records is backup.json's.
		loc := a.entries[MetaEntry(s.Name)]
		raw := make([]byte, loc.size)
		if _, err := a.r.ReadAt(raw, loc.off); err != nil {
			t.Fatal(err)
		}
		var meta struct{ Config json.RawMessage }
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		var want, got bytes.Buffer
		json.Compact(&want, meta.Config)
		json.Compact(&got, s.Config.Raw)
		if want.String() != got.String() || s.Config.Name != s.Name || len(s.Config.Subjects) == 0 {
			t.Errorf("stream %s: the manifest records the configuration %s (name %q, subjects %q); backup.json holds %s", s.Name, got.String(), s.Config.Name, s.Config.Subjects, want.String())
		}
	}
}

// A configuration keeps the bytes it was read from, fields unknown here and
// their order included; one changed after reading refuses to be written.
func TestStreamConfigKeepsItsBytes(t *testing.T) {
	in := `{"zz_new_field":{"a":[1,2]},"name":"S","subjects":["s.>","t"],"max_age":0}`
	var c StreamConfig
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.Name != "S" || len(c.Subjects) != 2 || c.Subjects[1] != "t" {
		t.Fatalf("parsed %+v", c)
	}
	// json.Marshal escapes <, > and & in what a Marshaler gives, as it
	// does in strings it encodes itself (the manifests of old did so too).
	out, err := json.Marshal(c)
	if want := strings.ReplaceAll(in, ">", `\u003e`); err != nil || string(out) != want {
		t.Fatalf("written as %s (%v), want %s", out, err, want)
	}
	ind, err := json.MarshalIndent(struct {
		Config StreamConfig `json:"config"`
	}{c}, "", "  ")
	if err != nil || !bytes.Contains(ind, []byte("\"zz_new_field\": {\n      \"a\": [\n")) {
		t.Fatalf("indented as %s (%v)", ind, err)
	}
	c.Name = "T"
	if _, err := json.Marshal(c); err == nil {
		t.Fatal("a configuration whose Name was changed was written")
	}
	byHand, err := json.Marshal(StreamConfig{Name: "H", Subjects: []string{"h.>"}})
	if err != nil || string(byHand) != `{"name":"H","subjects":["h.\u003e"]}` {
		t.Fatalf("a configuration made by hand is written as %s (%v)", byHand, err)
	}
	var null StreamConfig
	if err := json.Unmarshal([]byte("null"), &null); err != nil || null.Raw != nil || null.Name != "" {
		t.Fatalf("null read as %+v (%v)", null, err)
	}
	if err := json.Unmarshal([]byte(`{"name":5}`), &c); err == nil {
		t.Fatal("a configuration whose name is a number was read")
	}
}

// A synthetic archive's manifest records backup.json's configuration as it
// was written.
func TestWriterRecordsTheConfigAsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bus.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := NewWriter(f, WriterInfo{KeeperVersion: "test"})
	sw, err := w.Stream("S")
	if err != nil {
		t.Fatal(err)
	}
	sw.Data().Write([]byte("not really a snapshot"))
	cfg := `{"name": "S", "subjects": ["a.>"], "future": true, "storage": "file"}`
	sw.Meta().Write([]byte(`{"config": ` + cfg + `, "state": {"messages": 1, "first_seq": 1, "last_seq": 1}}`))
	sm, err := sw.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if string(sm.Config.Raw) != cfg || sm.Config.Subjects[0] != "a.>" || sm.State.Msgs != 1 {
		t.Fatalf("recorded %s, %+v", sm.Config.Raw, sm.State)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	a, c, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !bytes.Contains(a.raw, []byte("\"config\": {\n        \"name\": \"S\",\n        \"subjects\": [\n          \"a.\\u003e\"\n        ],\n        \"future\": true,")) {
		t.Fatalf("manifest.json:\n%s", a.raw)
	}
}
