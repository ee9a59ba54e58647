package busarchive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jsm.go"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
)

// The fixture: a KV bucket with history, deletes and a purge; an object store
// with a multi-chunk object; a plain stream with headers and two durable
// consumers at different ack floors.
const (
	fxBucket  = "fixture"
	fxObjects = "files"
	fxStream  = "EVENTS"
	fxBigObj  = "big.bin"
	fxBigSize = 5*1024 + 77
	fxChunk   = 1024
	fxReader  = "reader" // acks 5
	fxAudit   = "audit"  // acks 12
)

var fxStreams = []string{"KV_" + fxBucket, "OBJ_" + fxObjects, fxStream}

func fxBigBytes() []byte {
	b := make([]byte, fxBigSize)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// makeFixture makes the fixture on the bus behind js.
func makeFixture(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx := testCtx(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fxBucket, History: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{"a", "1"}, {"a", "2"}, {"b", "x"}, {"c", "y"}, {"a", "3"}, {"d", "dee"}} {
		if _, err := kv.PutString(ctx, p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "c"); err != nil {
		t.Fatal(err)
	}

	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: fxObjects})
	if err != nil {
		t.Fatal(err)
	}
	meta := jetstream.ObjectMeta{Name: fxBigObj, Opts: &jetstream.ObjectMetaOptions{ChunkSize: fxChunk}}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(fxBigBytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "small.txt", "small\n"); err != nil {
		t.Fatal(err)
	}

	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fxStream, Subjects: []string{"events.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		m := nats.NewMsg(fmt.Sprintf("events.%d", i%3))
		m.Data = []byte(fmt.Sprintf("event %d", i))
		if i%2 == 0 {
			m.Header.Set("Trace-Id", fmt.Sprintf("t-%d", i))
			m.Header.Add("Tag", "even")
			m.Header.Add("Tag", "second")
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for name, acks := range map[string]int{fxReader: 5, fxAudit: 12} {
		c, err := js.CreateConsumer(ctx, fxStream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		if err := sample.Ack(ctx, c, acks); err != nil {
			t.Fatal(err)
		}
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// snapshotArchive snapshots the streams through jsm.go straight into a new
// bus.tar at path.
func snapshotArchive(t testing.TB, nc *nats.Conn, path string, streams ...string) *busarchive.Manifest {
	t.Helper()
	ctx := testCtx(t)
	mgr, err := jsm.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := busarchive.NewWriter(f, busarchive.WriterInfo{KeeperVersion: "test", ServerVersion: nc.ConnectedServerVersion()})
	for _, name := range streams {
		st, err := mgr.LoadStream(name)
		if err != nil {
			t.Fatal(err)
		}
		sw, err := w.Stream(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SnapshotToBuffer(ctx, sw.Data(), sw.Meta(), jsm.SnapshotConsumers()); err != nil {
			sw.Abort()
			t.Fatalf("snapshot %s: %v", name, err)
		}
		if _, err := sw.Finish(); err != nil {
			t.Fatalf("finish %s: %v", name, err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// restoreArchive restores every stream of the archive through its section
// readers, nothing extracted.
func restoreArchive(t testing.TB, nc *nats.Conn, a *busarchive.Archive) {
	t.Helper()
	ctx := testCtx(t)
	mgr, err := jsm.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range a.Streams() {
		data, err := a.StreamData(name)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := a.StreamMeta(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mgr.RestoreSnapshotFromBuffer(ctx, name, data, meta); err != nil {
			t.Fatalf("restore %s: %v", name, err)
		}
	}
}

// fxView is everything the fixture holds, as a restore must give it back.
type fxView struct {
	dump    *sample.Snapshot
	kv      []string // every KV entry in history: key, revision, operation, value
	objects []string // every object: name, size, SHA-256 of the bytes read back
	floors  []string // every consumer: stream, name, ack floor, delivered, pending
}

func viewFixture(t testing.TB, js jetstream.JetStream) *fxView {
	t.Helper()
	ctx := testCtx(t)
	v := &fxView{}
	var err error
	if v.dump, err = sample.Dump(ctx, js, fxStreams...); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, fxBucket)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
	if err != nil {
		t.Fatal(err)
	}
	for e := range wt.Updates() {
		if e == nil {
			break
		}
		v.kv = append(v.kv, fmt.Sprintf("%s rev=%d op=%s value=%q", e.Key(), e.Revision(), e.Operation(), e.Value()))
	}
	wt.Stop()
	obs, err := js.ObjectStore(ctx, fxObjects)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		b, err := obs.GetBytes(ctx, info.Name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		v.objects = append(v.objects, fmt.Sprintf("%s size=%d chunks=%d sha256=%s", info.Name, len(b), info.Chunks, hex.EncodeToString(sum[:])))
	}
	slices.Sort(v.objects)
	for _, c := range []string{fxReader, fxAudit} {
		cons, err := js.Consumer(ctx, fxStream, c)
		if err != nil {
			t.Fatal(err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v.floors = append(v.floors, fmt.Sprintf("%s/%s ack_floor=%d delivered=%d pending=%d", fxStream, c, ci.AckFloor.Stream, ci.Delivered.Stream, ci.NumPending))
	}
	dropViewConsumers(t, js)
	return v
}

// dropViewConsumers deletes the consumers the view's own reads left (the
// KV watcher's and each object get's ordered consumer, which the server
// removes on its own a while later): a snapshot taken next would hold
// them, and the view of the server it is restored into would list them
// beside the fixture's durables.
func dropViewConsumers(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx := testCtx(t)
	for _, name := range fxStreams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		lister := s.ListConsumers(ctx)
		var ephemeral []string
		for ci := range lister.Info() {
			if ci.Config.Durable == "" {
				ephemeral = append(ephemeral, ci.Name)
			}
		}
		if err := lister.Err(); err != nil {
			t.Fatal(err)
		}
		for _, c := range ephemeral {
			if err := s.DeleteConsumer(ctx, c); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Fatalf("deleting the view's consumer %s on %s: %v", c, name, err)
			}
		}
	}
}

// checkFixtureShape fails unless v is the fixture as makeFixture made it, so
// an equal comparison of two views cannot pass on two empty ones.
func checkFixtureShape(t testing.TB, v *fxView) {
	t.Helper()
	kv := strings.Join(v.kv, "\n")
	for _, want := range []string{`a rev=1 op=KeyValuePutOp value="1"`, `a rev=5 op=KeyValuePutOp value="3"`, `b rev=7 op=KeyValueDeleteOp`, `c rev=8 op=KeyValuePurgeOp`, `d rev=6 op=KeyValuePutOp value="dee"`} {
		if !strings.Contains(kv, want) {
			t.Fatalf("KV history lacks %q:\n%s", want, kv)
		}
	}
	big := sha256.Sum256(fxBigBytes())
	if len(v.objects) != 2 || v.objects[0] != fmt.Sprintf("%s size=%d chunks=6 sha256=%s", fxBigObj, fxBigSize, hex.EncodeToString(big[:])) {
		t.Fatalf("objects %q", v.objects)
	}
	if v.floors[0] != fxStream+"/reader ack_floor=5 delivered=5 pending=15" || v.floors[1] != fxStream+"/audit ack_floor=12 delivered=12 pending=8" {
		t.Fatalf("consumers %q", v.floors)
	}
	var n int
	for _, s := range v.dump.Streams {
		n += len(s.Messages)
	}
	if n < 20+6+7 {
		t.Fatalf("the dump holds only %d messages", n)
	}
}

func compareViews(t testing.TB, was, now *fxView) {
	t.Helper()
	if d := sample.Diff(was.dump, now.dump); d != "" {
		t.Errorf("messages and consumers differ after restore:\n%s", d)
	}
	for _, c := range []struct {
		what     string
		was, now []string
	}{{"KV entries", was.kv, now.kv}, {"objects", was.objects, now.objects}, {"consumers", was.floors, now.floors}} {
		if !slices.Equal(c.was, c.now) {
			t.Errorf("%s differ after restore:\nwas %q\nnow %q", c.what, c.was, c.now)
		}
	}
}

// startBus starts an embedded server and connects to it.
func startBus(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, nc, js := jstest.Start(t, nil)
	return nc, js
}

// copyFile copies src to a new file dst.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
