package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestEmptyStoreMovesToAnother: README's move to another store, with a
// store that holds no point yet: stop the keeper, copy the (empty) store,
// serve from the copy. The keeper on the copy serves (it used to exit 4:
// "… has no store id yet"), says it took the index over, and answers.
func TestEmptyStoreMovesToAnother(t *testing.T) {
	b := newBed(t)
	if err := b.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	src, dst := "file://"+b.dir, "file://"+filepath.Join(t.TempDir(), "copy")
	code, out, errText := runArgs(t, "copy", "--from-store", src, "--to-store", dst)
	if code != 0 {
		t.Fatalf("copy of an empty store: exit %d\n%s%s", code, out, errText)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncbuf.Buffer
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{Conn: connFlags{Server: b.url}, Dir: filepath.Join(t.TempDir(), "keeper"), Store: dst,
			Prefix: verbs.DefaultPrefix, Bucket: "kept", LogFormat: "text", LogLevel: "info", Err: &logs,
			ready: func(*verbs.Service, string) { ready <- struct{}{} }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve on the copy of an empty store ended: exit %d, %v\n%s", exitCode(err), err, logs.String())
	}
	if !strings.Contains(logs.String(), "the index moved to this store") {
		t.Errorf("the keeper on the copy did not say it took the index over:\n%s", logs.String())
	}
	var o outs
	if err := runList(ctx, listOptions{Client: b.flags(), Out: o.output()}); err != nil {
		t.Fatalf("list against the keeper on the copy: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
}
