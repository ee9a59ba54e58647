package spool

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/store/storetest"
)

// feed writes n pseudo-random bytes of seed into w in pieces of varied
// size, closes it, and returns their SHA-256.
func feed(t testing.TB, w io.WriteCloser, n int, seed uint64) [32]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	buf := make([]byte, 256<<10)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	h := sha256.New()
	for n > 0 {
		k := min(n, 1+r.IntN(len(buf)))
		p := buf[:k]
		p[0] = byte(n) // so that pieces differ
		if _, err := w.Write(p); err != nil {
			t.Error(err)
			break
		}
		h.Write(p)
		n -= k
	}
	w.Close()
	return [32]byte(h.Sum(nil))
}

func drain(t testing.TB, r io.Reader) [32]byte {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, r, make([]byte, 64<<10)); err != nil {
		t.Error(err)
	}
	return [32]byte(h.Sum(nil))
}

func noFiles(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("a spool left %s in its directory", e.Name())
	}
}

// TestSpoolOrder: what is written comes out in order, whether it lay in
// memory or in the file, with the reader behind, then catching up; the
// file is never seen in the directory, and the memory is given back.
func TestSpoolOrder(t *testing.T) {
	dir := t.TempDir()
	if err := OpenDir(dir); err != nil {
		t.Fatal(err)
	}
	b := NewBudget(3*4096, 4096, HeadPatience)
	for _, after := range []bool{false, true} {
		s := New(b, dir)
		var wrote [32]byte
		var wg sync.WaitGroup
		wg.Go(func() { wrote = feed(t, s.Data(), 5<<20, 7) })
		if after {
			wg.Wait() // all written before the reader begins
			noFiles(t, dir)
		}
		got := drain(t, s)
		wg.Wait()
		if got != wrote {
			t.Errorf("read after the writer ended %v: the bytes read differ from those written", after)
		}
		if after && s.Spooled() != 5<<20-2*4096 {
			t.Errorf("%d bytes went to the file with a budget of 3 chunks (one kept for a spool at the head), want all but 2 chunks", s.Spooled())
		}
		s.Close()
		if n := len(b.tokens); n != 0 {
			t.Errorf("%d chunk(s) of the budget not given back", n)
		}
		if _, err := s.Data().Write([]byte("late")); err == nil {
			t.Error("a write after Close was taken")
		}
	}
	noFiles(t, dir)
}

// TestSpoolBackToMemory: a spool that went to its file comes back to
// memory once its reader caught up, and the bytes still come out in order.
func TestSpoolBackToMemory(t *testing.T) {
	dir := t.TempDir()
	b := NewBudget(3*4096, 4096, HeadPatience)
	s := New(b, dir)
	s.patience = 0 // a write at the head goes to the file at once, as before any was read
	defer s.Close()
	var all []byte
	put := func(n int, c byte) {
		p := make([]byte, n)
		for i := range p {
			p[i] = c + byte(i%7)
		}
		if _, err := s.Data().Write(p); err != nil {
			t.Fatal(err)
		}
		all = append(all, p...)
	}
	var got []byte
	take := func(n int) {
		p := make([]byte, n)
		if _, err := io.ReadFull(s, p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p...)
	}
	put(100<<10, 'a') // before its turn: 8 KiB in memory (a chunk is kept for the head), the rest to the file
	if f := s.Spooled(); f != 100<<10-2*4096 {
		t.Fatalf("%d bytes in the file, want %d", f, 100<<10-2*4096)
	}
	take(100 << 10) // caught up: every chunk given back
	put(8<<10, 'k')
	if f := s.Spooled(); f != 100<<10-2*4096 {
		t.Errorf("a spool caught up wrote to its file again (%d bytes there)", f)
	}
	put(20<<10, 'q') // at the head: 4 KiB more in memory (all 3 chunks), then the file again
	if f := s.Spooled(); f != 100<<10-2*4096+16<<10 {
		t.Errorf("%d bytes in the file, want %d", f, 100<<10-2*4096+16<<10)
	}
	s.Data().Close()
	rest, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if got = append(got, rest...); !bytes.Equal(got, all) {
		t.Fatalf("read %d bytes, not the %d written in order", len(got), len(all))
	}
}

// TestSpoolHeadWaitsForItsReader: once the archive reads a spool, a write
// that finds its memory full waits for the reader instead of going to the
// file, so a reader slower than the writer costs no file at all; a reader
// that stalls past the patience still gets the file, and the bytes come out
// in order either way.
func TestSpoolHeadWaitsForItsReader(t *testing.T) {
	dir := t.TempDir()
	for _, stall := range []bool{false, true} {
		b := NewBudget(3*4096, 4096, HeadPatience)
		s := New(b, dir)
		s.patience = 100 * time.Millisecond
		one := make([]byte, 1)
		s.Data().Write(one)
		if _, err := s.Read(one); err != nil { // the archive's turn came: the spool is at the head
			t.Fatal(err)
		}
		var wrote [32]byte
		var wg sync.WaitGroup
		wg.Go(func() { wrote = feed(t, s.Data(), 2<<20, 9) })
		h := sha256.New()
		buf := make([]byte, 3000)
		for i := 0; ; i++ {
			k, err := s.Read(buf)
			h.Write(buf[:k])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case stall && i == 50:
				time.Sleep(4 * s.patience)
			case i%64 == 0:
				time.Sleep(time.Millisecond) // slower than the writer
			}
		}
		wg.Wait()
		if [32]byte(h.Sum(nil)) != wrote {
			t.Errorf("stall %v: the bytes read differ from those written", stall)
		}
		if f := s.Spooled(); (f > 0) != stall {
			t.Errorf("stall %v: %d bytes went to the file", stall, f)
		}
		// A stall of four patiences costs one wait: the writes after it go
		// to the file at once until the reader has read it to its end.
		if want := map[bool]int{false: 0, true: 1}[stall]; s.gaveUp != want {
			t.Errorf("stall %v: %d writes waited the whole patience, want %d", stall, s.gaveUp, want)
		}
		s.Close()
		if n := len(b.tokens); n != 0 {
			t.Errorf("stall %v: %d chunk(s) of the budget not given back", stall, n)
		}
	}
	noFiles(t, dir)
}

// TestSpoolHeadBacklogPaced: a stream that spooled to its file before its
// turn came (the usual case for every stream but the first of a snapshot
// taken at once) has its writes wait, once it is at the head, until the
// reader has read that file to its end, then goes through memory: the file
// does not grow after the turn, with a reader slower than the writer (a
// store slower than the server). Before, every byte after the turn went
// through the file too, and back, for as long as the reader was behind.
func TestSpoolHeadBacklogPaced(t *testing.T) {
	dir := t.TempDir()
	b := NewBudget(3*4096, 4096, HeadPatience)
	s := New(b, dir)
	s.patience = 10 * time.Second // the reader never stalls here
	defer s.Close()
	// Before its turn: 256 KiB, all but the 2 shared chunks to the file.
	first := feed(t, nopCloser{s.Data()}, 256<<10, 5)
	backlog := s.Spooled()
	if backlog != 256<<10-2*4096 {
		t.Fatalf("%d bytes went to the file before the turn, want all but the 2 shared chunks", backlog)
	}
	buf := make([]byte, 3000)
	h := sha256.New()
	k, err := s.Read(buf) // the turn came, the backlog still in the file
	if err != nil {
		t.Fatal(err)
	}
	h.Write(buf[:k])
	var wrote [32]byte
	var wg sync.WaitGroup
	wg.Go(func() { wrote = feed(t, s.Data(), 2<<20, 6) })
	for i, left := 0, 256<<10-k; left > 0; i++ { // the backlog, slowly
		k, err := s.Read(buf[:min(len(buf), left)])
		if err != nil {
			t.Fatal(err)
		}
		h.Write(buf[:k])
		left -= k
		if i%8 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if [32]byte(h.Sum(nil)) != first {
		t.Error("the backlog came out changed")
	}
	got := drain(t, s)
	wg.Wait()
	if got != wrote {
		t.Error("the bytes written after the turn came out changed")
	}
	if f := s.Spooled(); f != backlog || s.gaveUp != 0 {
		t.Errorf("the file grew from %d to %d bytes while its backlog was read (%d writes gave up waiting); want no growth", backlog, f, s.gaveUp)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// TestSpoolChunkKeptForTheHead: spools waiting for their turn never take
// the last chunk of the budget, so the spool at the head goes through
// memory even when another spooled before; chunks given back are reused.
func TestSpoolChunkKeptForTheHead(t *testing.T) {
	dir := t.TempDir()
	b := NewBudget(3*4096, 4096, HeadPatience)
	waiting, head := New(b, dir), New(b, dir)
	defer waiting.Close()
	waiting.Data().Write(patterned(64<<10, 'w'))
	if n := len(b.tokens); n != 2 {
		t.Fatalf("a spool waiting for its turn holds %d chunks of 3, want 2", n)
	}
	head.mu.Lock()
	head.head = true // its turn came (as its first Read would say)
	head.mu.Unlock()
	head.Data().Write(patterned(4096, 'h'))
	if f := head.Spooled(); f != 0 {
		t.Errorf("the spool at the head wrote %d bytes to its file, with a chunk kept for it", f)
	}
	head.Close()
	if len(b.free) != 1 {
		t.Fatalf("%d chunks kept for reuse after the head closed, want its 1", len(b.free))
	}
	c, _, ok := b.take(true)
	if !ok || cap(c) != 4096 || len(c) != 0 || len(b.free) != 0 {
		t.Errorf("take after a give: %d/%d bytes, %v, %d left for reuse; want the empty chunk given back", len(c), cap(c), ok, len(b.free))
	}
	b.give(c, false)
}

// patterned is n bytes of a pattern that begins with c.
func patterned(n int, c byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = c + byte(i%13)
	}
	return p
}

// TestSpoolDirLeftovers: a spool file a stopped keeper left is removed,
// anything else stays, and a symlink is refused.
func TestSpoolDirLeftovers(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/"+fileName+"123", []byte("x"), 0o600)
	os.WriteFile(dir+"/other", []byte("x"), 0o600)
	if err := OpenDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/" + fileName + "123"); !os.IsNotExist(err) {
		t.Errorf("leftover spool file: %v", err)
	}
	if _, err := os.Stat(dir + "/other"); err != nil {
		t.Errorf("another file was removed: %v", err)
	}
	link := t.TempDir() + "/spool"
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := OpenDir(link); err == nil {
		t.Error("a symlinked spool directory was taken")
	}
	fresh := t.TempDir() + "/spool"
	if err := OpenDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("spool directory %v %v, want 0700", fi, err)
	}
}

// TestSpoolMemoryBound spools three streams of 96 MiB at once, the first
// written whole before any is read (the most they ever hold), and holds
// the Go heap's growth (everything in the test process) under 32 MiB: the
// spools' memory is the keeper's one budget, the rest goes to files.
func TestSpoolMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 288 MiB")
	}
	dir := t.TempDir()
	b := NewBudget(Memory, Chunk, HeadPatience)
	const each = 96 << 20
	stop := storetest.WatchHeap(t)
	spools := make([]*Spool, 3)
	wrote := make([][32]byte, 3)
	var wg sync.WaitGroup
	for i := range spools {
		spools[i] = New(b, dir)
		wg.Go(func() { wrote[i] = feed(t, spools[i].Data(), each, uint64(i)) })
	}
	// Written whole before any is read: the most a spool ever holds.
	wg.Wait()
	var spooled int64
	for i, s := range spools {
		if drain(t, s) != wrote[i] {
			t.Errorf("stream %d: the bytes read differ from those written", i)
		}
		spooled += s.Spooled()
		s.Close()
	}
	p := stop()
	t.Logf("3 × %d MiB spooled at once, %d MiB of it to files; peak heap growth %.1f MiB", each>>20, spooled>>20, float64(p)/(1<<20))
	if spooled < 3*each-Memory {
		t.Errorf("only %d bytes went to files; the memory budget is %d", spooled, Memory)
	}
	if p > 32<<20 {
		t.Errorf("peak heap %d bytes; the bound is %d", p, 32<<20)
	}
	noFiles(t, dir)
}
