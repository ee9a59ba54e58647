package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// TestNatsBackupExportOfACut: a point taken while a writer publishes, its
// cut leaving out the messages stored after it, exports as nats backup
// directories that `nats backup validate` accepts and `nats backup restore
// stream` restores into a fresh server with exactly the messages and bytes
// the point's manifest says its cut holds, and the snapshot's last
// sequence. The point is taken again (up to five times) until its cut
// leaves a message out.
func TestNatsBackupExportOfACut(t *testing.T) {
	const module, local = "natscut", "ledger"
	tmp := t.TempDir()
	_, nc, js, _ := keptOnProcs(t, tmp, module, local)
	names := sample.NamesOf(module, local)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
			if _, err := js.Publish(ctx, module+"."+local+".orders.cut", fmt.Appendf(nil, "round %d", n)); err != nil && ctx.Err() == nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	keeperDir := filepath.Join(tmp, "keeper")
	var fp string
	var cut *busarchive.StreamManifest
	for try := 1; try <= 5 && cut == nil; try++ {
		fp = fmt.Sprintf("cut%d", try)
		r := mustCall(t, nc, "snapshot-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": fp, "caller": "e2e"})
		if !strings.Contains(r.Said, " at the cut ") {
			t.Fatalf("the reply does not say the cut: %s", r.Said)
		}
		var m busarchive.Manifest
		if err := json.Unmarshal(tarEntries(t, filepath.Join(keeperDir, "points", module, local, "f1-"+fp, "bus.tar"))["manifest.json"], &m); err != nil {
			t.Fatal(err)
		}
		if sm := m.Stream(names.Stream); sm != nil && sm.Cut != nil && sm.Cut.From > 0 {
			cut = sm
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the writer stopped: %v", err)
	}
	if cut == nil {
		t.Fatal("five points taken while the writer published left no message out")
	}
	to := filepath.Join(tmp, "exported")
	if code, stdout, stderr := runCLI(t, tmp, "export", module, local, "--form", "1", "--before", fp, "--dir", keeperDir, "--to", to); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	fresh := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "fresh"))
	for _, s := range names.Streams() {
		natsCmd(t, tmp, "", "backup", "validate", filepath.Join(to, s), "--no-progress")
		natsCmd(t, tmp, fresh.url(), "backup", "restore", "stream", filepath.Join(to, s), "--no-progress")
	}
	fjs, err := jetstream.New(connect(t, fresh.url()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := fjs.Stream(context.Background(), names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	if st.Msgs != cut.Cut.Msgs || st.Bytes != cut.Cut.Bytes || st.LastSeq != cut.State.LastSeq {
		t.Fatalf("nats backup restore stream gave %d messages, %d bytes, last sequence %d; the point's cut holds %d messages, %d bytes, to %d",
			st.Msgs, st.Bytes, st.LastSeq, cut.Cut.Msgs, cut.Cut.Bytes, cut.State.LastSeq)
	}
	t.Logf("the cut held %d of the snapshot's %d messages (left out from %d); restored %d to %d", cut.Cut.Msgs, cut.State.Msgs, cut.Cut.From, st.Msgs, st.LastSeq)
}
