package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// natsCmd runs the real nats CLI (natscli v0.5.0) against url and returns
// its combined output, failing the test unless it exits 0.
func natsCmd(t *testing.T, home, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	all := append([]string{"--no-context", "--timeout", "1m"}, args...)
	if url != "" {
		all = append([]string{"--server", url}, all...)
	}
	cmd := exec.CommandContext(ctx, tools.NatsCLI(t), all...)
	cmd.Env = cleanEnv(home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, tail(string(out)))
	}
	return string(out)
}

// dirFiles lists the names in dir, sorted.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestNatsBackupImport: `nats backup stream` of a KV bucket's stream and of
// a plain stream with two consumers, `nats-keeper import` of the two
// directories while a keeper serves the store, then restore-kept of the
// imported point over data that changed since: the streams are back
// exactly as the nats CLI backed them up (every message's sequence,
// subject, headers and payload, and both consumers' positions). The point
// is listed and verifies like any other, and the act is recorded.
func TestNatsBackupImport(t *testing.T) {
	const module, local = "natsin", "ledger"
	tmp := t.TempDir()
	srv, nc, js, _ := keptOnProcs(t, tmp, module, local)
	names := sample.NamesOf(module, local)
	streams := []string{names.KVStream, names.Stream}
	ctx := context.Background()
	was, err := sample.Dump(ctx, js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if len(was.Streams[1].Consumers) != 2 || len(was.Streams[0].Messages) == 0 {
		t.Fatalf("the sample holds %d KV messages and %d consumers on %s; want some and 2", len(was.Streams[0].Messages), len(was.Streams[1].Consumers), names.Stream)
	}
	backups := filepath.Join(tmp, "backups")
	kvDir, streamDir := filepath.Join(backups, "kv"), filepath.Join(backups, "stream")
	natsCmd(t, tmp, srv.url(), "backup", "stream", names.KVStream, kvDir, "--no-progress")
	natsCmd(t, tmp, srv.url(), "backup", "stream", names.Stream, streamDir, "--no-progress")
	if got := dirFiles(t, streamDir); !slices.Equal(got, []string{"backup.json", "stream.arc.s2"}) {
		t.Fatalf("nats backup stream wrote %v", got)
	}
	if err := sample.Change(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}

	keeperDir := filepath.Join(tmp, "keeper")
	rep, out := mustCLI(t, tmp, srv.url(), "import", module, local, "--form", "2", "--before", "fromnats", "--dir", keeperDir,
		"--from", kvDir, "--from", streamDir, "--why", "e2e: bring a nats backup in", "--json")
	if rep.Point == nil || len(rep.Point.Streams) != 2 || !strings.HasPrefix(rep.Said, "Imported restore point natsin/ledger f2-fromnats from 2 nats backup directories") {
		t.Fatalf("import replied %s", out)
	}
	if act, ok := lastAct(t, js, "import-kept"); !ok || act.Outcome != "done" || act.What != rep.Said || act.Why != "e2e: bring a nats backup in" {
		t.Errorf("the import's act is %+v (found %v); want done, saying %q", act, ok, rep.Said)
	}
	req := map[string]any{"module": module, "local": local, "form": 2, "fingerprint": "fromnats", "caller": "e2e"}
	mustVerify(t, nc, "", req)
	l := callJSON(t, nc, "", "list-kept", map[string]any{"module": module})
	if got := pointFingerprints(l); !slices.Equal(got, []string{"fromnats"}) {
		t.Errorf("list-kept lists the points %v; want the imported one", got)
	}

	req["why"] = "e2e: restore the imported point"
	mustCall(t, nc, "restore-kept", req)
	now, err := sample.Dump(ctx, js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(was, now); d != "" {
		t.Fatalf("after restoring the imported point the streams differ from what nats backup stream took:\n%s", d)
	}
}

// TestNatsBackupImportRefused: a directory whose snapshot is truncated, and
// a backup of a stream of another module, are each refused with a sentence
// (exit 2) before anything is written: no point, no archive, no index
// record.
func TestNatsBackupImportRefused(t *testing.T) {
	const module, local = "natsno", "ledger"
	tmp := t.TempDir()
	srv, _, js, _ := keptOnProcs(t, tmp, module, local)
	ctx := context.Background()
	if err := sample.Create(ctx, js, "othermod", "ledger"); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(tmp, "good")
	natsCmd(t, tmp, srv.url(), "backup", "stream", sample.NamesOf(module, local).Stream, good, "--no-progress")
	other := filepath.Join(tmp, "other")
	natsCmd(t, tmp, srv.url(), "backup", "stream", sample.NamesOf("othermod", "ledger").Stream, other, "--no-progress")
	damaged := filepath.Join(tmp, "damaged")
	if err := os.Mkdir(damaged, 0o700); err != nil {
		t.Fatal(err)
	}
	meta, _ := os.ReadFile(filepath.Join(good, "backup.json"))
	data, _ := os.ReadFile(filepath.Join(good, "stream.arc.s2"))
	os.WriteFile(filepath.Join(damaged, "backup.json"), meta, 0o600)
	os.WriteFile(filepath.Join(damaged, "stream.arc.s2"), data[:len(data)*2/3], 0o600)

	keeperDir := filepath.Join(tmp, "keeper")
	before := listing(t, keeperDir)
	keysBefore := indexKeys(t, js)
	prefix := "import-kept refused: restore point natsno/ledger f1-x was not imported: "
	for _, c := range []struct {
		dir, want string
	}{
		{damaged, damaged + ": stream.arc.s2 does not decode: its first bytes are not whole s2 (s2: corrupt input): it is damaged or truncated, so nothing was written"},
		{other, other + ": it is a backup of stream othermod_ledger, which is not a stream of kept data natsno/ledger " +
			"(made of KV_natsno_ledger, OBJ_natsno_ledger, natsno_ledger by the naming rule), so nothing was written"},
	} {
		code, stdout, stderr := runCLI(t, tmp, "import", module, local, "--form", "1", "--before", "x", "--dir", keeperDir,
			"--from", good, "--from", c.dir, "--server", srv.url())
		if code != 2 || !strings.Contains(stderr, prefix+c.want) {
			t.Errorf("import of %s: exit %d\n%s%s\nwant exit 2 and %q", c.dir, code, stdout, stderr, prefix+c.want)
		}
	}
	if d := mapDiff(before, listing(t, keeperDir)); d != "" {
		t.Errorf("a refused import changed the keeper's directory:\n%s", d)
	}
	if got := indexKeys(t, js); !slices.Equal(got, keysBefore) {
		t.Errorf("a refused import changed the index: %v, was %v", got, keysBefore)
	}
}

// TestNatsBackupExport: `nats-keeper export` of a point writes one
// directory per stream holding exactly the files `nats backup stream`
// writes, byte for byte the point's archive entries; `nats backup validate`
// accepts each, and `nats backup restore stream` into a fresh server gives
// back the streams exactly as they were when the point was taken (messages,
// subjects, headers, sequences, consumer positions). An aside exports too.
// An export to a directory that is not empty is refused (exit 4), and it
// is left as it was.
func TestNatsBackupExport(t *testing.T) {
	const module, local = "natsout", "ledger"
	tmp := t.TempDir()
	srv, nc, js, _ := keptOnProcs(t, tmp, module, local)
	names := sample.NamesOf(module, local)
	ctx := context.Background()
	was, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "out", "caller": "e2e"}
	mustCall(t, nc, "snapshot-kept", req)
	keeperDir := filepath.Join(tmp, "keeper")

	to := filepath.Join(tmp, "exported")
	code, stdout, stderr := runCLI(t, tmp, "export", module, local, "--form", "1", "--before", "out", "--dir", keeperDir, "--to", to)
	if code != 0 || !strings.HasPrefix(stdout, "Exported restore point natsout/ledger f1-out from file://") {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	entries := tarEntries(t, filepath.Join(keeperDir, "points", module, local, "f1-out", "bus.tar"))
	got := dirFiles(t, to)
	if want := names.Streams(); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("export wrote %v; want a directory per stream %v", got, want)
	}
	for _, s := range got {
		if files := dirFiles(t, filepath.Join(to, s)); !slices.Equal(files, []string{"backup.json", "stream.arc.s2"}) {
			t.Errorf("%s holds %v; nats backup stream writes backup.json and stream.arc.s2", s, files)
		}
		for _, f := range []string{"backup.json", "stream.arc.s2"} {
			b, err := os.ReadFile(filepath.Join(to, s, f))
			if err != nil || !bytes.Equal(b, entries["streams/"+s+"/"+f]) {
				t.Errorf("%s/%s is not byte for byte the archive's entry (%v)", s, f, err)
			}
			if st, err := os.Stat(filepath.Join(to, s, f)); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s: mode %v (%v); want 0600", s, f, st.Mode().Perm(), err)
			}
		}
		natsCmd(t, tmp, "", "backup", "validate", filepath.Join(to, s), "--no-progress")
		// What nats backup stream writes of the same, unchanged stream.
		cli := filepath.Join(tmp, "cli", s)
		natsCmd(t, tmp, srv.url(), "backup", "stream", s, cli, "--no-progress")
		a, _ := os.ReadFile(filepath.Join(cli, "backup.json"))
		if b, _ := os.ReadFile(filepath.Join(to, s, "backup.json")); !bytes.Equal(a, b) {
			t.Errorf("%s/backup.json: the export's %d bytes differ from the %d nats backup stream wrote of the same stream:\n%s\n%s", s, len(b), len(a), b, a)
		}
		// Two snapshots differ only in the time the server stamps on its
		// head entries (state.json, the consumers) as it writes them.
		if a, b := snapshotEntries(t, filepath.Join(cli, "stream.arc.s2")), snapshotEntries(t, filepath.Join(to, s, "stream.arc.s2")); !slices.Equal(a, b) {
			t.Errorf("%s/stream.arc.s2: the export holds entries\n%v\nnats backup stream wrote\n%v", s, b, a)
		}
	}
	if st, err := os.Stat(to); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the export's directory: %v; want mode 0700", err)
	}

	fresh := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "fresh"))
	for _, s := range got {
		natsCmd(t, tmp, fresh.url(), "backup", "restore", "stream", filepath.Join(to, s), "--no-progress")
	}
	fjs, err := jetstream.New(connect(t, fresh.url()))
	if err != nil {
		t.Fatal(err)
	}
	now, err := sample.Dump(ctx, fjs, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(was, now); d != "" {
		t.Fatalf("the exported point restored by nats backup restore stream differs:\n%s", d)
	}

	// An existing target that is not empty is refused and left alone.
	keep := filepath.Join(tmp, "taken")
	if err := os.MkdirAll(filepath.Join(keep, "mine"), 0o700); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, tmp, "export", module, local, "--form", "1", "--before", "out", "--dir", keeperDir, "--to", keep)
	want := keep + ": the export's target directory exists and is not empty (it holds 1 entries), so nothing was exported; give a new or empty directory"
	if code != 4 || !strings.Contains(stderr, want) {
		t.Errorf("export to a directory that is not empty: exit %d\n%s%s\nwant exit 4 and %q", code, stdout, stderr, want)
	}
	if got := dirFiles(t, keep); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("the refused export's target now holds %v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, ".taken.partial-*")); len(left) > 0 {
		t.Errorf("the refused export left %v", left)
	}

	// An aside exports the same way.
	if err := sample.Change(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	req["why"] = "e2e: set the changed data aside"
	r := mustCall(t, nc, "restore-kept", req)
	aside, _ := r.Body["aside"].(map[string]any)
	id, _ := aside["id"].(string)
	asideTo := filepath.Join(tmp, "aside-exported")
	code, stdout, stderr = runCLI(t, tmp, "export", "--aside", id, "--dir", keeperDir, "--to", asideTo)
	if code != 0 || !strings.HasPrefix(stdout, "Exported aside "+id+" from ") {
		t.Fatalf("export --aside %s: exit %d\n%s%s", id, code, stdout, stderr)
	}
	for _, s := range dirFiles(t, asideTo) {
		natsCmd(t, tmp, "", "backup", "validate", filepath.Join(asideTo, s), "--no-progress")
	}
}

// tarEntries reads every entry of the tar at path whole, by name.
func tarEntries(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range tartest.Entries(t, b) {
		out[e.Hdr.Name] = e.Data
	}
	return out
}

// snapshotEntries decodes a server snapshot (stream.arc.s2) into one line
// per entry: its name, sequence, sizes and payload's SHA-256, and for a
// message its time.
func snapshotEntries(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := archive.NewReader(s2.NewReader(f))
	var out []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s does not decode: %v", path, err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s does not decode: %v", path, err)
		}
		line := fmt.Sprintf("%s seq %d sizes %d+%d sha256 %x", h.Name, h.Sequence, h.HeaderSize, h.PayloadSize, sha256.Sum256(b))
		if h.Sequence > 0 {
			line += fmt.Sprintf(" at %d", h.Timestamp)
		}
		out = append(out, line)
	}
}
