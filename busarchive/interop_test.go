package busarchive_test

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// TestNatsCLIRestore untars one stream's two entries into a directory, exactly
// as an operator would, and restores it with the standard nats CLI (natscli
// v0.5.0); the stream reads back equal, consumers included.
func TestNatsCLIRestore(t *testing.T) {
	natsCLI := tools.NatsCLI(t)
	nc, js := startBus(t)
	makeFixture(t, js)
	path := filepath.Join(t.TempDir(), "bus.tar")
	snapshotArchive(t, nc, path, fxStreams...)
	streams := []string{fxStream, "KV_" + fxBucket}
	was, err := sample.Dump(testCtx(t), js, streams...)
	if err != nil {
		t.Fatal(err)
	}

	nc2, js2 := startBus(t)
	home := t.TempDir()
	for _, stream := range streams {
		dir := filepath.Join(t.TempDir(), stream)
		untarStream(t, path, stream, dir)
		cmd := exec.Command(natsCLI, "--no-context", "-s", nc2.ConnectedUrl(), "backup", "restore", "stream", "--no-progress", dir)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "NATS_CONTEXT=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nats backup restore stream %s: %v\n%s", dir, err, out)
		}
	}
	now, err := sample.Dump(testCtx(t), js2, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(was, now); d != "" {
		t.Fatalf("the streams restored by the nats CLI differ:\n%s", d)
	}
	if len(now.Streams[0].Messages) != 20 || len(now.Streams[0].Consumers) != 2 {
		t.Fatalf("restored %s has %d messages and %d consumers", fxStream, len(now.Streams[0].Messages), len(now.Streams[0].Consumers))
	}
}

// untarStream extracts streams/<stream>/ of the archive into dir: with the
// system's tar when there is one (what an operator runs), else archive/tar.
func untarStream(t *testing.T, archive, stream, dir string) {
	t.Helper()
	tmp := t.TempDir()
	if tarBin, err := exec.LookPath("tar"); err == nil {
		out, err := exec.Command(tarBin, "-xf", archive, "-C", tmp, busarchive.DataEntry(stream), busarchive.MetaEntry(stream)).CombinedOutput()
		if err != nil {
			t.Fatalf("tar -xf: %v\n%s", err, out)
		}
	} else {
		t.Logf("no tar command here; extracting with archive/tar")
		extractGo(t, archive, tmp)
	}
	if err := os.Rename(filepath.Join(tmp, busarchive.StreamsDir, stream), dir); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "backup.json,stream.arc.s2" {
		t.Fatalf("extracted %v", names)
	}
}

func extractGo(t *testing.T, archive, dir string) {
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
}
