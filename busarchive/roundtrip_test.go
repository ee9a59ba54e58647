package busarchive_test

import (
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// TestRoundTrip snapshots the fixture from a real server into bus.tar, checks
// the archive, restores it from the tar into a fresh server and compares
// everything key by key, byte by byte and by consumer ack floor.
func TestRoundTrip(t *testing.T) {
	nc, js := startBus(t)
	makeFixture(t, js)
	was := viewFixture(t, js)
	checkFixtureShape(t, was)

	path := filepath.Join(t.TempDir(), "bus.tar")
	m := snapshotArchive(t, nc, path, fxStreams...)
	if len(m.Streams) != 3 || m.Stream(fxStream).State.Consumers != 2 || m.Stream(fxStream).State.Msgs != 20 || m.Stream(fxStream).State.LastSeq != 20 {
		t.Fatalf("manifest streams %+v", m.Streams)
	}

	a, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := a.Verify(testCtx(t))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for i, r := range rep.Streams {
		st := m.Streams[i].State
		if !r.Complete || r.Messages != st.Msgs || r.FirstSeq != st.FirstSeq || r.LastSeq != st.LastSeq || r.Consumers != st.Consumers {
			t.Fatalf("stream %s: report %+v, manifest state %+v", r.Name, r, st)
		}
	}

	nc2, js2 := startBus(t)
	restoreArchive(t, nc2, a)
	now := viewFixture(t, js2)
	compareViews(t, was, now)
}
