package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// TestCopyEmptyDirToS3: README's move to another store when the keeper's
// directory holds no point yet, with the processes an operator runs: stop
// the keeper, copy the directory into S3, serve from S3. The keeper on S3
// serves (it used to exit 4, "… has no store id yet"), the index's store
// record names S3, a point taken there is listed, and a keeper on the old
// directory is refused from then on.
func TestCopyEmptyDirToS3(t *testing.T) {
	tmp := t.TempDir()
	bus := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "bus"))
	nc := connect(t, bus.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "keeper")
	k := startKeeper(t, bus.url(), dir, tmp)
	waitKeepers(t, nc, 1, k)
	k.p.stop(t, syscall.SIGTERM, time.Minute)

	s := startS3(t, "keeper-points")
	s3url := "s3://keeper-points/moved"
	mustRun(t, tmp, s.env(), []string{"copy", "--from-store", "file://" + dir, "--to-store", s3url,
		"--s3-endpoint", s.endpoint, "--s3-path-style"}, "0 copied, 0 skipped, 0 failed")
	onS3 := startKeeperArgs(t, bus.url(), filepath.Join(tmp, "s3keeper"), tmp, s.args(s3url), s.env()...)
	waitKeepers(t, nc, 1, onS3)
	if got := bucketEntries(t, js, "kept")["store"]; !strings.Contains(got, s3url) {
		t.Errorf("the index's store record is %s; want the S3 store %s", got, s3url)
	}
	makeTinyKept(t, js, "moved", "data")
	mustCall(t, nc, "snapshot-kept", map[string]any{"module": "moved", "local": "data", "form": 1, "fingerprint": "ons3", "caller": "e2e"})
	if got := pointFingerprints(mustCall(t, nc, "list-kept", map[string]any{"module": "moved"})); len(got) != 1 || got[0] != "ons3" {
		t.Errorf("list-kept on the keeper on S3 lists %v; want the point taken there", got)
	}
	onS3.p.stop(t, syscall.SIGTERM, time.Minute)
	if code, _, stderr := runKeeper(t, tmp, nil, []string{"serve", "--server", bus.url(), "--dir", dir}, 2*time.Minute); code != 4 || !strings.Contains(stderr, "belongs to "+s3url) {
		t.Errorf("a keeper on the old directory after the move: exit %d; want 4, naming the S3 store\n%s", code, tail(stderr))
	}
}
