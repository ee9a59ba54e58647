package busarchive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

var updateNatsBackup = flag.Bool("update-natsbackup", false, "rewrite testdata/natsbackup/v0.5.0 with the nats CLI (never do this to make a test pass)")

// natsBackupFixture holds one `nats backup stream` directory per stream of
// the fixture (the KV bucket's stream and the plain stream with its two
// consumers), written by natscli v0.5.0 against nats-server 2.15.3: the
// format import must read forever.
var natsBackupFixture = filepath.Join("..", "testdata", "natsbackup", "v0.5.0")

var natsBackupStreams = []string{"KV_" + fxBucket, fxStream}

// TestWriteNatsBackupFixture makes the fixture, only when asked with
// -update-natsbackup.
func TestWriteNatsBackupFixture(t *testing.T) {
	if !*updateNatsBackup {
		return
	}
	natsCLI := tools.NatsCLI(t)
	nc, js := startBus(t)
	makeFixture(t, js)
	if err := os.RemoveAll(natsBackupFixture); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, s := range natsBackupStreams {
		cmd := exec.Command(natsCLI, "--no-context", "-s", nc.ConnectedUrl(), "backup", "stream", s, filepath.Join(natsBackupFixture, s), "--no-progress")
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "NATS_CONTEXT=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nats backup stream %s: %v\n%s", s, err, out)
		}
	}
	t.Logf("wrote %s", natsBackupFixture)
}

// copyBackup copies the fixture's directory of stream into a new directory
// and returns it.
func copyBackup(t *testing.T, stream string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), stream)
	for _, f := range []string{busarchive.MetaName, busarchive.DataName} {
		copyFile(t, filepath.Join(natsBackupFixture, stream, f), filepath.Join(dir, f))
	}
	return dir
}

// TestCheckBackupDir reads the natscli v0.5.0 fixture whole: its stream,
// its decoded content, its data's size and SHA-256, and backup.json as it
// is. The same directory with the data named stream.tar.s2 (as natscli
// v0.4 names it, whatever the server) reads the same.
func TestCheckBackupDir(t *testing.T) {
	for _, s := range natsBackupStreams {
		dir := copyBackup(t, s)
		bd, err := busarchive.CheckBackupDir(context.Background(), dir)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		data, _ := os.ReadFile(filepath.Join(dir, busarchive.DataName))
		meta, _ := os.ReadFile(filepath.Join(dir, busarchive.MetaName))
		sum := sha256.Sum256(data)
		if bd.Stream != s || bd.DataName != busarchive.DataName || bd.DataSize != int64(len(data)) || bd.DataSum != hex.EncodeToString(sum[:]) ||
			!bytes.Equal(bd.Meta, meta) || !bd.Report.Complete || bd.Report.Messages == 0 {
			t.Errorf("%s: checked as %+v", s, bd)
		}
		if s == fxStream && bd.Report.Consumers != 2 {
			t.Errorf("%s: %d consumers; the fixture has 2", s, bd.Report.Consumers)
		}
		if err := os.Rename(filepath.Join(dir, busarchive.DataName), filepath.Join(dir, busarchive.LegacyDataName)); err != nil {
			t.Fatal(err)
		}
		old, err := busarchive.CheckBackupDir(context.Background(), dir)
		if err != nil || old.DataName != busarchive.LegacyDataName || old.DataSum != bd.DataSum || old.Report != bd.Report {
			t.Errorf("%s with %s: %+v, %v", s, busarchive.LegacyDataName, old, err)
		}
	}
}

// TestCheckBackupDirRefused: every way a directory can fail is refused
// with its sentence, an error of ErrNotBackup.
func TestCheckBackupDirRefused(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(natsBackupFixture, fxStream, busarchive.DataName))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(natsBackupFixture, fxStream, busarchive.MetaName))
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot whose archive ends early, s2-compressed whole.
	raw, err := io.ReadAll(s2.NewReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	var cutBuf bytes.Buffer
	w := s2.NewWriter(&cutBuf)
	w.Write(raw[:len(raw)*2/3])
	w.Close()
	cut := cutBuf.Bytes()
	var tarred bytes.Buffer // what a server before 2.15 sent: an s2-compressed tar
	sw := s2.NewWriter(&tarred)
	tw := tar.NewWriter(sw)
	tw.WriteHeader(&tar.Header{Name: "meta.inf", Mode: 0o600, Size: 2})
	tw.Write([]byte("{}"))
	tw.Close()
	sw.Close()

	type files map[string][]byte
	for _, c := range []struct {
		name  string
		files files
		want  string
	}{
		{"no backup.json", files{"stream.arc.s2": data},
			"backup.json: open %s/backup.json: no such file or directory (natscli writes it after the last chunk: a backup without it did not finish)"},
		{"empty backup.json", files{"stream.arc.s2": data, "backup.json": nil}, "backup.json is empty: the backup did not finish"},
		{"backup.json not JSON", files{"stream.arc.s2": data, "backup.json": []byte("{\"config\":")},
			"backup.json is not valid JSON: unexpected end of JSON input"},
		{"a bad stream name", files{"stream.arc.s2": data, "backup.json": bytes.Replace(meta, []byte(`"name": "EVENTS"`), []byte(`"name": "EV.ENTS"`), 1)},
			`backup.json names stream "EV.ENTS", which is not a valid stream name`},
		{"no data", files{"backup.json": meta}, "it holds neither stream.arc.s2 nor stream.tar.s2, the snapshot a nats backup directory holds"},
		{"both data names", files{"backup.json": meta, "stream.arc.s2": data, "stream.tar.s2": data},
			"it holds both stream.arc.s2 and stream.tar.s2, so which one is the backup is not known"},
		{"not s2", files{"backup.json": meta, "stream.arc.s2": []byte("hello, world")},
			"stream.arc.s2 does not decode: its first bytes are not whole s2 (s2: corrupt input): it is damaged or truncated"},
		{"truncated", files{"backup.json": meta, "stream.arc.s2": cut},
			"stream.arc.s2 does not decode: the snapshot ends before its end-of-backup sentinel, after message "},
		{"a tar before 2.15", files{"backup.json": meta, "stream.tar.s2": tarred.Bytes()},
			"stream.tar.s2 holds the tar snapshot of a NATS Server before 2.15, which a restore point cannot hold; restore it into a 2.15 server with `nats backup restore stream` and take the point there"},
		{"state disagrees", files{"stream.arc.s2": data, "backup.json": bytes.Replace(meta, []byte(`"consumer_count": 2`), []byte(`"consumer_count": 3`), 1)},
			"stream.arc.s2 disagrees with backup.json: stream.arc.s2: archive content disagrees with its manifest: the snapshot holds 2 consumers, the manifest records 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, b := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := busarchive.CheckBackupDir(context.Background(), dir)
			want := dir + ": " + strings.ReplaceAll(c.want, "%s", dir)
			if !errors.Is(err, busarchive.ErrNotBackup) || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// TestCheckBackupDirSymlinks: a directory or a file reached through a
// symbolic link is never read.
func TestCheckBackupDirSymlinks(t *testing.T) {
	real := copyBackup(t, fxStream)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := busarchive.CheckBackupDir(context.Background(), link); err == nil || err.Error() != link+": it is a symbolic link, which is never followed" {
		t.Errorf("a linked directory: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dir, 0o700)
	copyFile(t, filepath.Join(real, busarchive.MetaName), filepath.Join(dir, busarchive.MetaName))
	if err := os.Symlink(filepath.Join(real, busarchive.DataName), filepath.Join(dir, busarchive.DataName)); err != nil {
		t.Fatal(err)
	}
	want := dir + ": stream.arc.s2: it is a symbolic link, which is never followed"
	if _, err := busarchive.CheckBackupDir(context.Background(), dir); err == nil || err.Error() != want {
		t.Errorf("a linked data file: %v\nwant %s", err, want)
	}
}

// TestExportDirs writes the golden archive out as nats backup directories:
// each holds the archive's two entries byte for byte, reads back through
// CheckBackupDir, and nothing else is left beside the target.
func TestExportDirs(t *testing.T) {
	a := openFile(t, goldenPath)
	parent := t.TempDir()
	target := filepath.Join(parent, "out")
	got, err := a.ExportDirs(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(fxStreams) {
		t.Fatalf("exported %+v", got)
	}
	for i, s := range got {
		if s.Name != fxStreams[i] || s.Dir != filepath.Join(target, s.Name) {
			t.Errorf("exported %+v", s)
		}
		bd, err := busarchive.CheckBackupDir(context.Background(), s.Dir)
		if err != nil {
			t.Fatalf("the export of %s does not read back: %v", s.Name, err)
		}
		m := a.Manifest().Stream(s.Name)
		if bd.DataSum != m.Entries[0].SHA256 || bd.DataSize != m.Entries[0].Size || s.DataSize != bd.DataSize {
			t.Errorf("%s: exported %d bytes %s; the manifest says %d %s", s.Name, bd.DataSize, bd.DataSum, m.Entries[0].Size, m.Entries[0].SHA256)
		}
		if sum := sha256.Sum256(bd.Meta); hex.EncodeToString(sum[:]) != m.Entries[1].SHA256 {
			t.Errorf("%s: backup.json is not the archive's", s.Name)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("beside the export: %v", ents)
	}
}

// TestExportDirsRefused: a target that is not empty, a symbolic link or a
// file is refused and left as it was; an archive whose data does not match
// its manifest fails the export, which leaves no directory behind.
func TestExportDirsRefused(t *testing.T) {
	a := openFile(t, goldenPath)
	parent := t.TempDir()
	full := filepath.Join(parent, "full")
	os.MkdirAll(filepath.Join(full, "x"), 0o700)
	link := filepath.Join(parent, "link")
	os.Symlink(t.TempDir(), link)
	file := filepath.Join(parent, "file")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, c := range []struct{ target, want string }{
		{full, full + ": the export's target directory exists and is not empty (it holds 1 entries), so nothing was exported; give a new or empty directory"},
		{link, link + " is a symbolic link, which is never followed, so nothing was exported"},
		{file, file + " exists and is not a directory, so nothing was exported"},
	} {
		if _, err := a.ExportDirs(context.Background(), c.target); err == nil || err.Error() != c.want {
			t.Errorf("export to %s: %v\nwant %s", c.target, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 3 {
		t.Errorf("the refused exports left %v", ents)
	}

	// A flipped byte in the last stream's data: the first streams are
	// written, the last fails its check, and nothing stays.
	g, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	last := a.Manifest().Streams[len(a.Manifest().Streams)-1].Name
	off := bytes.Index(g, []byte(busarchive.DataEntry(last))) // its tar header; the data follows it
	g[off+512+50] ^= 0xff
	bad := filepath.Join(t.TempDir(), "bus.tar")
	os.WriteFile(bad, g, 0o600)
	b := openFile(t, bad)
	out := t.TempDir()
	target := filepath.Join(out, "export")
	_, err = b.ExportDirs(context.Background(), target)
	if !errors.Is(err, busarchive.ErrChecksum) || !strings.HasPrefix(err.Error(), "stream "+last+": ") || !strings.Contains(err.Error(), "so nothing was exported to "+target) {
		t.Errorf("export of a damaged archive: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("the failed export left %v", ents)
	}
}

// FuzzCheckBackupDir feeds CheckBackupDir arbitrary backup.json and data
// files. It must never panic, must refuse with ErrNotBackup, and what it
// accepts must be whole: a valid stream name, the data's true size and
// SHA-256, a snapshot decoded to its end.
func FuzzCheckBackupDir(f *testing.F) {
	for _, s := range natsBackupStreams {
		meta, err := os.ReadFile(filepath.Join(natsBackupFixture, s, busarchive.MetaName))
		if err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(natsBackupFixture, s, busarchive.DataName))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(meta, data)
		f.Add(meta, data[:len(data)/2])
		f.Add(meta[:len(meta)-3], data)
		f.Add([]byte(`{"config":{"name":"S"},"state":{"consumer_count":-1}}`), data)
	}
	f.Add([]byte(`{}`), []byte{})
	dir := f.TempDir() // one per fuzzing process, its two files written again by each run
	f.Fuzz(func(t *testing.T, meta, data []byte) {
		if len(meta) > 1<<20 || len(data) > 4<<20 {
			return
		}
		for name, b := range map[string][]byte{busarchive.MetaName: meta, busarchive.DataName: data} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		bd, err := busarchive.CheckBackupDir(context.Background(), dir)
		if err != nil {
			if !errors.Is(err, busarchive.ErrNotBackup) || !strings.HasPrefix(err.Error(), dir+": ") {
				t.Fatalf("a refusal not of ErrNotBackup: %v", err)
			}
			return
		}
		sum := sha256.Sum256(data)
		if !busarchive.ValidStreamName(bd.Stream) || bd.DataSize != int64(len(data)) || bd.DataSum != hex.EncodeToString(sum[:]) ||
			!bd.Report.Complete || !bytes.Equal(bd.Meta, meta) || !slices.Contains([]string{busarchive.DataName}, bd.DataName) {
			t.Fatalf("accepted as %+v", bd)
		}
	})
}

// openFile opens the archive at path, closed when the test ends.
func openFile(t *testing.T, path string) *busarchive.Archive {
	t.Helper()
	a, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return a
}
