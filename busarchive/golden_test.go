package busarchive_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/busarchive/format1/bus.tar from a fresh fixture (never do this to make a test pass)")

// goldenPath is the format 1 archive every later version must still read.
var goldenPath = filepath.Join("..", "testdata", "busarchive", "format1", "bus.tar")

// TestWriteGolden makes the golden archive, only when asked with -update-golden.
func TestWriteGolden(t *testing.T) {
	if !*updateGolden {
		return
	}
	nc, js := startBus(t)
	makeFixture(t, js)
	checkFixtureShape(t, viewFixture(t, js))
	tmp := filepath.Join(t.TempDir(), "bus.tar")
	snapshotArchive(t, nc, tmp, fxStreams...)
	if _, err := busarchive.VerifyFile(testCtx(t), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(goldenPath); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	copyFile(t, tmp, goldenPath)
	t.Logf("wrote %s", goldenPath)
}

// TestGoldenFormat1 opens, verifies and restores the committed format 1
// archive into a fresh server, and finds the fixture whole.
func TestGoldenFormat1(t *testing.T) {
	a, c, err := busarchive.OpenFile(goldenPath)
	if err != nil {
		t.Fatalf("open the golden archive: %v", err)
	}
	defer c.Close()
	m := a.Manifest()
	if m.Format != 1 || len(m.Streams) != 3 || m.ServerVersion != "2.15.3" {
		t.Fatalf("golden manifest: format %d, %d streams, server %q", m.Format, len(m.Streams), m.ServerVersion)
	}
	rep, err := a.Verify(testCtx(t))
	if err != nil {
		t.Fatalf("verify the golden archive: %v", err)
	}
	want := map[string][2]uint64{"KV_" + fxBucket: {7, 0}, "OBJ_" + fxObjects: {9, 0}, fxStream: {20, 2}}
	for _, r := range rep.Streams {
		if w := want[r.Name]; !r.Complete || r.Messages != w[0] || uint64(r.Consumers) != w[1] {
			t.Fatalf("golden stream %+v, want %d messages and %d consumers", r, w[0], w[1])
		}
	}
	nc, js := startBus(t)
	restoreArchive(t, nc, a)
	checkFixtureShape(t, viewFixture(t, js))
}
