package keeper_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// A rollback soon after another one of the same kept data: nats-server
// deletes a stream by renaming its directory to .<name> and removing that
// in the background, and a second delete before that ends leaves the
// message blocks in place (and answers success), so the restore into the
// stream is refused ("expected sequence does not match store", 10062). The
// keeper removes the half-restored stream and restores it again once the
// server's removal is done, and the rollback succeeds with the point's data.
// Here the server's unfinished removal is a .<name> directory that goes
// away two seconds into the rollback.
func TestRestoreAgainWhenTheServerStillHeldTheStreamsFiles(t *testing.T) {
	logs := &syncbuf.Buffer{}
	e := newEnv(t, func(c *keeper.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	before := e.kept()
	e.snapshot(1, "fp")
	e.change()

	stream := e.names.Streams()[0]
	dirs, err := filepath.Glob(filepath.Join(e.srv.JetStreamConfig().StoreDir, "*", "streams", stream))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("the server's directory of %s: %v, %v", stream, dirs, err)
	}
	removing := filepath.Join(filepath.Dir(dirs[0]), "."+stream)
	if err := os.MkdirAll(filepath.Join(removing, "msgs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(removing, "msgs", "1.blk"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	gone := time.AfterFunc(2*time.Second, func() { os.RemoveAll(removing) })
	defer gone.Stop()

	if _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("restore-kept while the server still removed an old copy of %s: %v", stream, err)
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("after the rollback:\n%s", d)
	}
	if !strings.Contains(logs.String(), "files the server had not yet removed") {
		t.Errorf("the restore never met the server's leftover files, so the test tested nothing; the log:\n%s", logs.String())
	}
}
