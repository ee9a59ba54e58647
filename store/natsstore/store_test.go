package natsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

func sumOf(b []byte) string {
	c := store.NewChecksum()
	c.Write(b)
	return c.Sum()
}

// TestRoundTrip writes objects around the part size and reads them back
// whole, in ranges and with ReadAt.
func TestRoundTrip(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	s := open(t, single(t), "points", Options{})
	if d := s.Describe(); d.Kind != "nats" || !strings.HasSuffix(d.URL, "/points") || strings.Contains(d.URL, "@") {
		t.Fatalf("Describe: %+v", d)
	}
	for i, size := range []int64{0, 1, store.PartSize - 1, store.PartSize, store.PartSize + 1, 2*store.PartSize + 5} {
		data := patternBytes(uint64(i+1), size)
		key := "m/obj" + string(rune('a'+i))
		info, err := put(t, ctx, s, key, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != key || info.Size != size || info.Sum != sumOf(data) || info.Modified.IsZero() {
			t.Fatalf("commit of %d bytes: %+v, want sum %s", size, info, sumOf(data))
		}
		if st, err := s.Stat(ctx, key); err != nil || st != info {
			t.Fatalf("Stat: %+v, %v; commit said %+v", st, err, info)
		}
		o, err := s.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if o.Size() != size || o.Info() != info {
			t.Fatalf("Open: size %d, %+v", o.Size(), o.Info())
		}
		r, err := o.Reader(ctx, 0, size)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Reader of %d bytes read %d, %v", size, len(got), err)
		}
		for _, rg := range [][2]int64{{0, 1}, {size / 3, size / 2}, {store.PartSize - 3, 10}, {size - 1, 1}, {size, 0}} {
			off, n := rg[0], min(rg[1], size-rg[0])
			if off < 0 || n < 0 {
				continue
			}
			r, err := o.Reader(ctx, off, n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, data[off:off+n]) {
				t.Fatalf("Reader(%d, %d) of %d bytes: %d bytes, %v", off, n, size, len(got), err)
			}
			p := make([]byte, n)
			if k, err := o.ReadAt(p, off); k != int(n) || err != nil || !bytes.Equal(p, data[off:off+n]) {
				t.Fatalf("ReadAt(%d, %d) of %d bytes: %d, %v", n, off, size, k, err)
			}
		}
		p := make([]byte, 10)
		if k, err := o.ReadAt(p, max(0, size-4)); k != min(4, int(size)) || !errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt past the end of %d bytes: %d, %v", size, k, err)
		}
		if _, err := o.Reader(ctx, size, 1); err == nil {
			t.Fatal("a Reader past the end was made")
		}
		o.Close()
	}
	l, err := s.List(ctx, "m/")
	if err != nil || len(l) != 6 || l[0].Key != "m/obja" || l[5].Key != "m/objf" || l[4].Sum == "" || l[4].Size != store.PartSize+1 {
		t.Fatalf("List: %+v, %v", l, err)
	}
	if l, err := s.List(ctx, "n/"); err != nil || len(l) != 0 {
		t.Fatalf("List of nothing: %+v, %v", l, err)
	}
	if err := s.Delete(ctx, "m/objf"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "m/objf"); err != nil {
		t.Fatalf("a second delete: %v", err)
	}
	if _, err := s.Stat(ctx, "m/objf"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat after Delete: %v", err)
	}
	if _, err := s.Open(ctx, "m/objf"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Open after Delete: %v", err)
	}
	for _, n := range names(t, s) {
		if strings.HasPrefix(n, partsRoot) && !slices.Contains([]string{"1", "2"}, n[len(n)-1:]) {
			t.Fatalf("a part %s of the deleted object is left", n)
		}
	}
	if got := len(names(t, s)); got != 5+(0+1+1+1+2) {
		t.Fatalf("%d names in the bucket after the delete, want 5 heads and 5 parts: %v", got, names(t, s))
	}
	if _, err := s.Stat(ctx, "bad key"); !errors.Is(err, store.ErrBadKey) {
		t.Fatalf("Stat of a bad key: %v", err)
	}
}

// TestReplace commits over a key: readers see the new object, the old
// parts are gone, and an object opened before reads an error naming a part.
func TestReplace(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	s := open(t, single(t), "points", Options{})
	old := patternBytes(1, 2*store.PartSize)
	if _, err := put(t, ctx, s, "k", bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	before, err := s.Open(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	now := patternBytes(2, store.PartSize+7)
	info, err := put(t, ctx, s, "k", bytes.NewReader(now))
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Open(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, o.Size())
	if _, err := o.ReadAt(got, 0); err != nil || !bytes.Equal(got, now) || o.Info() != info {
		t.Fatalf("the replaced object reads %d bytes, %v", len(got), err)
	}
	if n := len(names(t, s)); n != 3 {
		t.Fatalf("after the replace the bucket holds %v, want one head and two parts", names(t, s))
	}
	_, err = before.ReadAt(make([]byte, 1), store.PartSize)
	if err == nil || !strings.Contains(err.Error(), "part 2 of 2 of k") || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("reading an object opened before the replace: %v", err)
	}
}

// TestFailedPutLeavesNothing: an upload cut off before its head, and a put
// cut off before its meta, are invisible, and Sweep removes what they left.
func TestFailedPutLeavesNothing(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	s := open(t, single(t), "points", Options{})
	if _, err := put(t, ctx, s, "keep", bytes.NewReader(patternBytes(3, store.PartSize+1))); err != nil {
		t.Fatal(err)
	}
	// An upload killed after two parts: the sink never sees Complete or Abort.
	k := s.newSink("lost")
	for n := 1; n <= 2; n++ {
		data := patternBytes(uint64(n), store.PartSize)
		if err := k.Part(ctx, n, store.Blocks{data}, sha256.Sum256(data)); err != nil {
			t.Fatal(err)
		}
	}
	// A put cut off by its context while its chunks were in flight.
	k2 := s.newSink("cut")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := k2.Part(cctx, 1, store.Blocks{patternBytes(9, store.PartSize)}, [32]byte{}); err == nil {
		t.Fatal("a part put with a cancelled context succeeded")
	}
	// Chunks a killed put published before it could write its meta.
	orphan := chunkSubject("points", "ORPHANNUID")
	if _, err := s.js.Publish(ctx, orphan, patternBytes(4, 1000)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"lost", "cut"} {
		if _, err := s.Stat(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Stat of %s: %v", key, err)
		}
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 1 || l[0].Key != "keep" {
		t.Fatalf("List: %+v, %v", l, err)
	}
	if err := s.Sweep(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := len(names(t, s)); n != 5 {
		t.Fatalf("a sweep of what is younger than an hour removed something: %v", names(t, s))
	}
	if err := s.Sweep(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := names(t, s); len(got) != 3 {
		t.Fatalf("after the sweep the bucket holds %v, want the head of keep and its two parts", got)
	}
	if _, err := s.stream.GetLastMsgForSubject(ctx, orphan); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the orphan chunks are still there: %v", err)
	}
	o, err := s.Open(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.ReadAt(make([]byte, o.Size()), 0); err != nil {
		t.Fatalf("keep after the sweep: %v", err)
	}
}

// TestDamagedPart: a part whose bytes were replaced, or that is gone, reads
// as an error naming it, never as other bytes.
func TestDamagedPart(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	s := open(t, single(t), "points", Options{Timeout: 5 * time.Second})
	data := patternBytes(5, 3*store.PartSize)
	if _, err := put(t, ctx, s, "d", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	o, err := s.Open(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	upload := o.(*object).parts[0].name[len(partsRoot):][:24]
	bad := bytes.Clone(data[store.PartSize : 2*store.PartSize])
	bad[100] ^= 1
	// Part 2's meta keeps its digest but names other bytes (as a disk
	// would that lost them).
	was, err := s.obs.GetInfo(ctx, partName(upload, 2))
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.obs.PutBytes(ctx, partName(upload, 2), bad)
	if err != nil {
		t.Fatal(err)
	}
	now.Digest = was.Digest
	meta, _ := json.Marshal(now)
	m := nats.NewMsg(metaSubject("points", now.Name))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = meta
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := s.remove(ctx, partName(upload, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatalf("part 1 is sound: %v", err)
	}
	_, err = o.ReadAt(make([]byte, 10), store.PartSize+5)
	if err == nil || !strings.Contains(err.Error(), "part 2 of 3 of d") || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("ReadAt in the damaged part: %v", err)
	}
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, r)
	if err == nil || !strings.Contains(err.Error(), "part 2 of 3 of d") || n > 2*store.PartSize {
		t.Fatalf("Reader of the damaged object: %d bytes, %v", n, err)
	}
	_, err = o.ReadAt(make([]byte, 10), 2*store.PartSize)
	if err == nil || !strings.Contains(err.Error(), "part 3 of 3 of d") || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("ReadAt in the missing part: %v", err)
	}
}

// TestKilledWriter kills a process in the middle of writing an object: the
// object never shows, and Sweep removes its parts and the chunks of the part
// it was putting.
func TestKilledWriter(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	js := single(t)
	s := open(t, js, "points", Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), writeEnv+"="+js.Conn().ConnectedUrl()+" points killed")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	chunks := func() uint64 {
		si, err := s.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return si.State.Msgs
	}
	// Kill it once three parts are in and the fourth is on its way: a
	// part is its chunks and its meta.
	per := uint64(store.PartSize/s.chunk + 1)
	for len(names(t, s)) < 3 || chunks() < 3*per+2 {
		if ctx.Err() != nil {
			cmd.Process.Kill()
			t.Fatal("the writer wrote no three parts")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := s.Stat(ctx, "killed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat of the killed object: %v", err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("List after the kill: %+v, %v", l, err)
	}
	left := len(names(t, s))
	t.Logf("killed with %d parts in and %d chunks of the next", left, chunks()-uint64(left)*per)
	if err := s.Sweep(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n, m := names(t, s), chunks(); len(n) != 0 || m != 0 {
		t.Fatalf("after the sweep of %d part objects the bucket holds %v and %d messages", left, n, m)
	}
}

// TestReadAtKeepsAPart: scanning an archive's tar headers, 512 bytes at a
// time, fetches each part once, not once for each header.
func TestReadAtKeepsAPart(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	s := open(t, single(t), "points", Options{URL: "nats://keeper:secret@vault:4222/points"})
	if u := s.Describe().URL; u != "nats://vault:4222/points" {
		t.Errorf("Describe names the store %q", u)
	}
	data := patternBytes(6, 3*store.PartSize)
	if _, err := put(t, ctx, s, "tar", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	o, err := s.Open(ctx, "tar")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	block := make([]byte, 512)
	for off := int64(0); off < o.Size(); off += 512 * 1000 {
		if _, err := o.ReadAt(block, off); err != nil || !bytes.Equal(block, data[off:off+512]) {
			t.Fatalf("ReadAt(512, %d): %v", off, err)
		}
	}
	if n := o.(*object).gets.Load(); n != 3 {
		t.Fatalf("%d headers read across 3 parts took %d gets", o.Size()/(512*1000)+1, n)
	}
	r, err := o.Reader(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if o.(*object).buf != nil {
		t.Error("the part ReadAt kept is still in memory after a Reader was begun")
	}
}
