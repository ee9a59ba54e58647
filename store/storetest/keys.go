package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
)

// List gives the committed objects whose key begins with the prefix, as a
// string prefix (a partial path element included), sorted by key, and not
// the one being written.
func testList(t *testing.T, s store.Store) {
	keys := []string{
		"store.json", "points/bil", "points/bill/x", "points/billing/a/f1-x/bus.tar",
		"points/billing/a/f1-x/point.json", "points/billing/b/f2-y/point.json", "points/billings",
		"points/bim/z", "aside/billing.a.1/aside.json", "a-b", "a.b", "a/b", "a0",
	}
	data := map[string][]byte{}
	for i, k := range keys {
		data[k] = randomBytes(uint64(100+i), i+1)
		mustPut(t, s, k, data[k])
	}
	pending, err := s.Create(t.Context(), "points/billing/pending")
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Abort()
	writeAll(pending, randomBytes(99, 1000))
	slices.Sort(keys)
	for _, prefix := range []string{"", "points/bil", "points/billing/", "points/billing/a/f1-x/bus.tar", "a", "a/", "nothing", "points/billing/pending"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		infos, err := s.List(t.Context(), prefix)
		if err != nil {
			t.Errorf("List(%q): %v", prefix, err)
			continue
		}
		if got := keysOf(infos); !slices.Equal(got, want) {
			t.Errorf("List(%q) gave\n\t%q\nwant\n\t%q", prefix, got, want)
			continue
		}
		for _, info := range infos {
			wantInfo(t, fmt.Sprintf("List(%q)", prefix), info, info.Key, data[info.Key])
		}
	}
}

// Delete of a missing key, of a prefix of keys, or of a key under an object,
// is nil and removes nothing; Delete of an object removes it alone.
func testDelete(t *testing.T, s store.Store) {
	a, b := "points/m/l/f1-x/point.json", "points/m/l/f1-x/bus.tar"
	mustPut(t, s, a, []byte("{}\n"))
	mustPut(t, s, b, randomBytes(20, 5000))
	for _, k := range []string{"points/m/l/f1-y/point.json", "points", "points/m/l/f1-x", a + "/x"} {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Errorf("Delete(%q), which holds no object: %v", k, err)
		}
	}
	if err := s.Delete(t.Context(), a); err != nil {
		t.Fatalf("Delete(%q): %v", a, err)
	}
	wantNotFound(t, s, a, "after Delete")
	if infos, err := s.List(t.Context(), ""); err != nil || !slices.Equal(keysOf(infos), []string{b}) {
		t.Errorf("List after Delete: %q, %v; want only %q", keysOf(infos), err, b)
	}
	if err := s.Delete(t.Context(), a); err != nil {
		t.Errorf("a second Delete(%q): %v", a, err)
	}
}

// Stat and Open of a key that holds no object wrap ErrNotFound: a missing
// key, a prefix of keys, a key under an object.
func testNotFound(t *testing.T, s store.Store) {
	mustPut(t, s, "points/billing/a", []byte("x"))
	for _, k := range []string{"missing", "points/billing", "points/bil", "points/billing/a/b", "points/billing/b"} {
		wantNotFound(t, s, k, "with no object there")
	}
}

// Keys that CheckKey refuses are refused by every call with ErrBadKey; a key
// of MaxKeyLen bytes is taken.
func testBadKeys(t *testing.T, s store.Store) {
	mustPut(t, s, "ok", []byte("ok"))
	copier, _ := s.(store.Copier)
	for _, key := range []string{"../x", "a//b", "/a", "a b", strings.Repeat("a", store.MaxKeyLen+1), "", "a/./b", "a/", "a\\b", "a\x00b"} {
		name := fmt.Sprintf("%.40q", key)
		if w, err := s.Create(t.Context(), key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Create(%s): %v; want ErrBadKey", name, err)
			if err == nil {
				w.Abort()
			}
		}
		if o, err := s.Open(t.Context(), key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Open(%s): %v; want ErrBadKey", name, err)
			if err == nil {
				o.Close()
			}
		}
		if _, err := s.Stat(t.Context(), key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Stat(%s): %v; want ErrBadKey", name, err)
		}
		if err := s.Delete(t.Context(), key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Delete(%s): %v; want ErrBadKey", name, err)
		}
		if copier == nil {
			continue
		}
		if _, err := copier.Copy(t.Context(), "ok", key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Copy to %s: %v; want ErrBadKey", name, err)
		}
		if _, err := copier.Copy(t.Context(), key, "ok2"); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Copy from %s: %v; want ErrBadKey", name, err)
		}
	}
	long := strings.Repeat(strings.Repeat("k", 99)+"/", 10) + strings.Repeat("k", 24)
	data := randomBytes(21, 10)
	mustPut(t, s, long, data)
	wantObject(t, s, long, data)
}

// Writers to different keys at once each commit their own bytes.
func testConcurrentWriters(t *testing.T, s store.Store) {
	const n = 4
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("c/%d/bus.tar", i)
			if _, err := put(t.Context(), s, key, randomBytes(uint64(30+i), ps+i*1000+1)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		wantObject(t, s, fmt.Sprintf("c/%d/bus.tar", i), randomBytes(uint64(30+i), ps+i*1000+1))
	}
}

// Copy (where the store implements Copier) makes an equal object, over an
// existing one too, that outlives its source; a missing source is
// ErrNotFound.
func testCopier(t *testing.T, s store.Store) {
	c, ok := s.(store.Copier)
	if !ok {
		t.Skip("the store does not implement store.Copier")
	}
	src, dst := "points/m/l/f1-x/bus.tar", "aside/m.l.1/bus.tar"
	data := randomBytes(40, ps+7)
	mustPut(t, s, src, data)
	info, err := c.Copy(t.Context(), src, dst)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	wantInfo(t, "Copy", info, dst, data)
	wantObject(t, s, dst, data)
	wantObject(t, s, src, data)
	over := "aside/m.l.2/bus.tar"
	mustPut(t, s, over, randomBytes(41, 100))
	if _, err := c.Copy(t.Context(), src, over); err != nil {
		t.Fatalf("Copy over an object: %v", err)
	}
	wantObject(t, s, over, data)
	if _, err := c.Copy(t.Context(), "missing", "y"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Copy of a missing key: %v; want ErrNotFound", err)
	}
	wantNotFound(t, s, "y", "after a Copy of a missing key")
	if err := s.Delete(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	wantObject(t, s, dst, data)
}

// Sweep never removes a committed object, and with an age leaves a write in
// progress alone.
func testSweep(t *testing.T, s store.Store) {
	objects := map[string][]byte{"points/a": {}, "points/b": randomBytes(50, ps+1), "store.json": []byte("{}")}
	for k, d := range objects {
		mustPut(t, s, k, d)
	}
	aborted, err := s.Create(t.Context(), "points/aborted")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(aborted, randomBytes(51, 1000))
	aborted.Abort()
	pending, err := s.Create(t.Context(), "points/c")
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Abort()
	objects["points/c"] = randomBytes(52, ps+ps/2)
	writeAll(pending, objects["points/c"][:ps/2])
	if err := s.Sweep(t.Context(), time.Hour); err != nil {
		t.Fatalf("Sweep(1h): %v", err)
	}
	writeAll(pending, objects["points/c"][ps/2:])
	if _, err := pending.Commit(t.Context()); err != nil {
		t.Fatalf("Commit of a write that a Sweep(1h) ran during: %v", err)
	}
	if err := s.Sweep(t.Context(), 0); err != nil {
		t.Fatalf("Sweep(0): %v", err)
	}
	for k, d := range objects {
		wantObject(t, s, k, d)
	}
	if infos, err := s.List(t.Context(), ""); err != nil || len(infos) != len(objects) {
		t.Errorf("List after Sweep: %q, %v; want the %d objects", keysOf(infos), err, len(objects))
	}
}

// Describe names the store and says what it guarantees.
func testDescribe(t *testing.T, s store.Store) {
	d := s.Describe()
	t.Logf("%+v", d)
	if !slices.Contains([]string{"file", "nats", "s3"}, d.Kind) || !strings.HasPrefix(d.URL, d.Kind+"://") {
		t.Errorf("Describe says kind %q, URL %q", d.Kind, d.URL)
	}
	if d.Publish == "" || d.Ranges == "" || d.Listing == "" {
		t.Error("Describe leaves Publish, Ranges or Listing unsaid")
	}
}

// FreeSpace (where the store implements FreeSpacer) says some room is left.
func testFreeSpacer(t *testing.T, s store.Store) {
	f, ok := s.(store.FreeSpacer)
	if !ok {
		t.Skip("the store does not implement store.FreeSpacer")
	}
	if n, err := f.FreeSpace(t.Context()); err != nil || n <= 0 {
		t.Errorf("FreeSpace: %d, %v", n, err)
	}
}

func testCloseTwice(t *testing.T, s store.Store) {
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
