package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memSink records what a part writer hands it and checks the PartSink
// contract as it goes: each part once, its sum, no two calls at a time, and
// at Complete, parts 1..count of partSize bytes but the last.
type memSink struct {
	t        *testing.T
	partSize int

	mu        sync.Mutex
	parts     map[int][]byte
	order     []int
	completes int
	count     int
	size      int64
	sum       string
	aborts    int

	busy         atomic.Int32
	failPart     int           // Part of this number fails
	failComplete bool          // Complete fails
	gate         chan struct{} // when set, Part waits for it
}

var errSink = errors.New("the sink refused")

func newMemSink(t *testing.T, partSize int) *memSink {
	return &memSink{t: t, partSize: partSize, parts: map[int][]byte{}}
}

func (s *memSink) enter() func() {
	if s.busy.Add(1) != 1 {
		s.t.Errorf("the sink was called while another call was running")
	}
	return func() { s.busy.Add(-1) }
}

func (s *memSink) Part(ctx context.Context, n int, blocks Blocks, sum [32]byte) error {
	defer s.enter()()
	data := blocks.Bytes()
	if s.gate != nil {
		<-s.gate
	}
	if n == s.failPart {
		return errSink
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.parts[n]; dup {
		s.t.Errorf("part %d came twice", n)
	}
	if sha256.Sum256(data) != sum {
		s.t.Errorf("part %d came with a sum that is not its SHA-256", n)
	}
	if len(data) == 0 || len(data) > s.partSize {
		s.t.Errorf("part %d has %d bytes", n, len(data))
	}
	s.parts[n] = bytes.Clone(data)
	s.order = append(s.order, n)
	return nil
}

func (s *memSink) Complete(ctx context.Context, count int, size int64, sum string) (Info, error) {
	defer s.enter()()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completes++
	if s.failComplete {
		return Info{}, errSink
	}
	s.count, s.size, s.sum = count, size, sum
	if len(s.parts) != count {
		s.t.Errorf("Complete of %d parts after %d parts", count, len(s.parts))
	}
	var total int64
	for n := 1; n <= count; n++ {
		if n < count && len(s.parts[n]) != s.partSize {
			s.t.Errorf("part %d of %d has %d bytes", n, count, len(s.parts[n]))
		}
		total += int64(len(s.parts[n]))
	}
	if total != size {
		s.t.Errorf("Complete of %d bytes; the parts hold %d", size, total)
	}
	return Info{Modified: time.Now()}, nil
}

func (s *memSink) Abort(ctx context.Context) {
	defer s.enter()()
	if ctx.Err() != nil {
		s.t.Errorf("Abort was given a context already done")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborts++
}

// readSink is a memSink that keeps parts where it reads them back (a
// PartReader), so the writer hands a held part to KeepPart at once and to
// Part, read back and patched, at Release.
type readSink struct {
	*memSink
	kept      map[int][]byte
	readBacks int
}

func newReadSink(t *testing.T, partSize int) *readSink {
	return &readSink{memSink: newMemSink(t, partSize), kept: map[int][]byte{}}
}

func (s *readSink) KeepPart(ctx context.Context, n int, blocks Blocks, sum [32]byte) error {
	defer s.enter()()
	data := blocks.Bytes()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.kept[n]; dup {
		s.t.Errorf("part %d was kept twice", n)
	}
	if sha256.Sum256(data) != sum {
		s.t.Errorf("part %d was kept with a sum that is not its SHA-256", n)
	}
	s.kept[n] = bytes.Clone(data)
	return nil
}

func (s *readSink) ReadPart(ctx context.Context, n int, into Blocks) error {
	defer s.enter()()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.kept[n]
	if !ok || len(p) != into.Len() {
		s.t.Errorf("part %d (%d bytes) was read back into %d bytes", n, len(p), into.Len())
		return errSink
	}
	into.Fill(bytes.NewReader(p))
	s.readBacks++
	return nil
}

func (s *memSink) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []byte
	for n := 1; n <= s.count; n++ {
		out = append(out, s.parts[n]...)
	}
	return out
}

// sumOf is the checksum of data in parts of partSize (Checksum's for
// PartSize).
func sumOf(data []byte, partSize int) string {
	var sums [][32]byte
	for len(data) > 0 {
		k := min(len(data), partSize)
		sums = append(sums, sha256.Sum256(data[:k]))
		data = data[k:]
	}
	return CombineSums(sums)
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)}).Read(b)
	return b
}

// writeChunks writes data in pieces of random sizes.
func writeChunks(t *testing.T, w Writer, data []byte, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	for len(data) > 0 {
		k := min(len(data), 1+rng.IntN(3<<20))
		if n, err := w.Write(data[:k]); err != nil || n != k {
			t.Fatalf("write of %d bytes: %d, %v", k, n, err)
		}
		data = data[k:]
	}
}

// The committed bytes are the bytes written, at every size around the part
// size, and the sum is NewChecksum's over them.
func TestPartWriterRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, PartSize - 1, PartSize, PartSize + 1, 3*PartSize + PartSize/2} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randomBytes(uint64(size), size)
			sink := newMemSink(t, PartSize)
			w := NewPartWriter(context.Background(), "a/b", sink)
			writeChunks(t, w, data, uint64(size))
			info, err := w.Commit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c := NewChecksum()
			c.Write(data)
			if info.Sum != c.Sum() || sink.sum != c.Sum() {
				t.Errorf("sum %s (the sink was given %s), NewChecksum says %s", info.Sum, sink.sum, c.Sum())
			}
			if info.Key != "a/b" || info.Size != int64(size) || info.Modified.IsZero() {
				t.Errorf("Commit said %+v", info)
			}
			if want := (size + PartSize - 1) / PartSize; sink.completes != 1 || sink.count != want {
				t.Errorf("%d Completes of %d parts, want one of %d", sink.completes, sink.count, want)
			}
			if !bytes.Equal(sink.bytes(), data) {
				t.Error("the committed bytes differ from the bytes written")
			}
			w.Abort()
			if sink.aborts != 0 {
				t.Error("Abort after Commit reached the sink")
			}
			if _, err := w.Write([]byte("x")); err == nil {
				t.Error("a Write after Commit was taken")
			}
		})
	}
}

// A part the hold overlaps goes to the sink after the parts that followed
// it, once released, with the patch in it and in its sum.
func TestPartWriterHeldPartGoesLast(t *testing.T) {
	const ps = 4096
	sink := newMemSink(t, ps)
	w := newPartWriter(context.Background(), "k", sink, ps)
	model := randomBytes(1, 100)
	w.Write(model)
	w.Hold(100, 512)
	hdr := make([]byte, 512)
	more := randomBytes(2, 3*ps)
	w.Write(hdr)
	w.Write(more)
	model = append(append(model, hdr...), more...)
	patch := bytes.Repeat([]byte{'P'}, 512)
	if _, err := w.WriteAt(patch, 100); err != nil {
		t.Fatal(err)
	}
	copy(model[100:], patch)
	w.Release()
	tail := randomBytes(3, 10)
	w.Write(tail)
	model = append(model, tail...)
	info, err := w.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2, 3, 1, 4}; !slices.Equal(sink.order, want) {
		t.Errorf("parts came in the order %v, want %v", sink.order, want)
	}
	if !bytes.Equal(sink.bytes(), model) || info.Sum != sumOf(model, ps) {
		t.Error("the committed bytes or their sum miss the patch")
	}
}

// Patches at the very start and end of a part, of the object, and across two
// parts (a hold may span two) land where they were written.
func TestPartWriterPatchAtEdges(t *testing.T) {
	const ps = 4096
	for _, c := range []struct {
		name      string
		off, n    int64
		total     int
		allocated int
		readBacks int
	}{
		{"start of the object", 0, 512, 3 * ps, 3, 1},
		{"start of a part", ps, 512, 3 * ps, 3, 1},
		{"end of a part", ps - 512, 512, 3 * ps, 3, 1},
		{"last byte of the object", 3*ps - 1, 1, 3 * ps, 3, 1},
		{"last bytes of a short last part", 2*ps + 88, 12, 2*ps + 100, 3, 0},
		{"across two parts", ps - 256, 512, 4 * ps, 4, 2},
		{"a whole part's length across two", ps / 2, ps, 4 * ps, 4, 2},
		{"exactly one part", ps, ps, 4 * ps, 3, 1},
		{"in the part still filling", ps + 10, 512, ps + 1000, 3, 0},
	} {
		// With a sink that reads parts back (a PartReader) a held part goes
		// to KeepPart when it fills and to Part, read back and patched, at
		// Release: two part buffers at most.
		for _, reads := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, reads back %v", c.name, reads), func(t *testing.T) {
				testPatchAt(t, c.off, c.n, c.total, map[bool]int{false: c.allocated, true: 2}[reads], reads, c.readBacks)
			})
		}
	}
}

// testPatchAt writes total bytes with n of them at off held and patched,
// through a memSink or (reads) a readSink, and checks what was committed.
func testPatchAt(t *testing.T, off, n int64, total, allocated int, reads bool, readBacks int) {
	const ps = 4096
	sink := newMemSink(t, ps)
	var rs *readSink
	w := newPartWriter(context.Background(), "k", sink, ps)
	if reads {
		rs = newReadSink(t, ps)
		sink, w = rs.memSink, newPartWriter(context.Background(), "k", rs, ps)
	}
	model := randomBytes(uint64(off), total)
	w.Write(model[:off])
	w.Hold(off, n) // before the held bytes are written, as an archive does
	w.Write(model[off:])
	patch := randomBytes(99, int(n))
	if _, err := w.WriteAt(patch, off); err != nil {
		t.Fatal(err)
	}
	copy(model[off:], patch)
	w.Release()
	info, err := w.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.bytes(), model) || info.Sum != sumOf(model, ps) {
		t.Error("the committed bytes or their sum miss the patch")
	}
	if w.allocated() > allocated {
		t.Errorf("%d part buffers were made, want at most %d", w.allocated(), allocated)
	}
	if rs != nil && rs.readBacks != readBacks {
		t.Errorf("%d parts were read back, want %d", rs.readBacks, readBacks)
	}
}

// A long object written with holds now and then keeps at most three parts in
// memory.
func TestPartWriterBoundsMemory(t *testing.T) {
	const ps = 4096
	sink := newMemSink(t, ps)
	w := newPartWriter(context.Background(), "k", sink, ps)
	data := randomBytes(5, 1024) // holds at multiples of 1024 never span two parts
	var off, held int64
	for i := range 200 {
		if i%10 == 0 {
			w.Hold(off, 512)
			held = off
		}
		w.Write(data)
		off += int64(len(data))
		if i%10 == 9 {
			w.WriteAt(data[:10], held)
			w.Release()
		}
	}
	if _, err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.allocated() > 3 {
		t.Errorf("%d part buffers were made, want at most 3", w.allocated())
	}
}

// A part fills while the one before it is still in the sink.
func TestPartWriterPipelines(t *testing.T) {
	const ps = 4096
	sink := newMemSink(t, ps)
	sink.gate = make(chan struct{})
	w := newPartWriter(context.Background(), "k", sink, ps)
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(make([]byte, 2*ps-1)) // part 1 to the sink, part 2 almost full
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second part did not fill while the first was in the sink")
	}
	close(sink.gate)
	if _, err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.count != 2 {
		t.Errorf("%d parts", sink.count)
	}
}

// While a part is in the sink, the next one fills leadBytes and no more:
// the writer's caller waits, and the writer never holds two whole parts.
func TestPartWriterLeadsByLeadBytes(t *testing.T) {
	sink := newMemSink(t, PartSize)
	sink.gate = make(chan struct{})
	w := newPartWriter(context.Background(), "k", sink, PartSize)
	var wrote atomic.Int64
	done := make(chan error, 1)
	go func() {
		blk := make([]byte, BlockSize)
		for range 2 * PartSize / BlockSize {
			if _, err := w.Write(blk); err != nil {
				done <- err
				return
			}
			wrote.Add(BlockSize)
		}
		done <- nil
	}()
	for deadline := time.Now().Add(10 * time.Second); wrote.Load() < PartSize+leadBytes; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d bytes were taken while the first part was in the sink", wrote.Load())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // time for writes that should wait to go on wrongly
	if got := wrote.Load(); got != PartSize+leadBytes {
		t.Errorf("%d bytes were taken while the first part was in the sink, want %d", got, PartSize+leadBytes)
	}
	close(sink.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if max := w.perPart + leadBytes/BlockSize; w.peak > max {
		t.Errorf("%d blocks were made, want at most %d (a part and the lead)", w.peak, max)
	}
}

// A zero-byte object is one Complete of no parts, with the empty checksum.
func TestPartWriterEmpty(t *testing.T) {
	sink := newMemSink(t, PartSize)
	info, err := NewPartWriter(context.Background(), "k", sink).Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sink.completes != 1 || sink.count != 0 || len(sink.order) != 0 || info.Size != 0 || info.Sum != NewChecksum().Sum() {
		t.Errorf("%d Completes, count %d, %d parts, %+v", sink.completes, sink.count, len(sink.order), info)
	}
}

// Every refused call fails the writer: Commit says why, never reaches
// Complete, and aborts the sink once.
func TestPartWriterRefuses(t *testing.T) {
	const ps = 4096
	for _, c := range []struct {
		name string
		do   func(w *partWriter)
	}{
		{"WriteAt with no hold", func(w *partWriter) { w.Write(make([]byte, 100)); w.WriteAt([]byte("x"), 10) }},
		{"WriteAt before the hold", func(w *partWriter) { w.Write(make([]byte, 100)); w.Hold(50, 10); w.WriteAt([]byte("xy"), 49) }},
		{"WriteAt after the hold", func(w *partWriter) { w.Write(make([]byte, 100)); w.Hold(50, 10); w.WriteAt([]byte("xy"), 59) }},
		{"WriteAt beyond the bytes written", func(w *partWriter) { w.Write(make([]byte, 100)); w.Hold(90, 20); w.WriteAt([]byte("xy"), 99) }},
		{"WriteAt after Release", func(w *partWriter) { w.Hold(0, 10); w.Write(make([]byte, 100)); w.Release(); w.WriteAt([]byte("x"), 0) }},
		{"a second Hold", func(w *partWriter) { w.Hold(0, 10); w.Hold(20, 10) }},
		{"a Hold over three parts", func(w *partWriter) { w.Hold(10, ps+1) }},
		{"a Hold of bytes handed over", func(w *partWriter) { w.Write(make([]byte, ps+10)); w.Hold(ps-1, 5) }},
		{"a negative Hold", func(w *partWriter) { w.Hold(0, -1) }},
		{"the sink refusing a part", func(w *partWriter) {
			w.sink.(*memSink).failPart = 2
			w.Write(make([]byte, 5*ps))
		}},
		{"the sink refusing the held part", func(w *partWriter) {
			w.sink.(*memSink).failPart = 1
			w.Hold(0, 10)
			w.Write(make([]byte, 3*ps))
		}},
		{"the sink refusing Complete", func(w *partWriter) { w.sink.(*memSink).failComplete = true; w.Write(make([]byte, ps)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := newMemSink(t, ps)
			w := newPartWriter(context.Background(), "k", sink, ps)
			c.do(w)
			_, err := w.Commit(context.Background())
			if err == nil {
				t.Fatal("Commit succeeded")
			}
			t.Log(err)
			if (sink.failPart != 0 || sink.failComplete) != errors.Is(err, errSink) {
				t.Errorf("the error %v does not wrap the sink's exactly when the sink failed", err)
			}
			if sink.completes > 0 && !sink.failComplete {
				t.Error("Complete was called")
			}
			if _, werr := w.Write([]byte("x")); werr == nil {
				t.Error("a Write after the failure was taken")
			}
			w.Abort()
			w.Abort()
			if sink.aborts != 1 {
				t.Errorf("the sink was aborted %d times, want once", sink.aborts)
			}
		})
	}
}

// A cancelled context stops the writer: the parts after it are not stored,
// and Commit with a cancelled context commits nothing.
func TestPartWriterCancelled(t *testing.T) {
	const ps = 4096
	t.Run("the writer's context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		sink := newMemSink(t, ps)
		w := newPartWriter(ctx, "k", sink, ps)
		w.Write(make([]byte, ps+1))
		cancel()
		w.Write(make([]byte, 2*ps))
		if _, err := w.Commit(context.Background()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit: %v, want context.Canceled", err)
		}
		if sink.completes != 0 || sink.aborts != 1 {
			t.Errorf("%d Completes, %d Aborts", sink.completes, sink.aborts)
		}
	})
	t.Run("Commit's context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		sink := newMemSink(t, ps)
		w := newPartWriter(context.Background(), "k", sink, ps)
		w.Write(make([]byte, ps+1))
		if _, err := w.Commit(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit: %v, want context.Canceled", err)
		}
		if sink.completes != 0 || sink.aborts != 1 {
			t.Errorf("%d Completes, %d Aborts", sink.completes, sink.aborts)
		}
	})
}

// Abort reaches the sink once, and a Write after it is refused.
func TestPartWriterAbort(t *testing.T) {
	sink := newMemSink(t, 4096)
	w := newPartWriter(context.Background(), "k", sink, 4096)
	w.Write(make([]byte, 10000))
	w.Abort()
	w.Abort()
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("a Write after Abort was taken")
	}
	if _, err := w.Commit(context.Background()); err == nil {
		t.Error("a Commit after Abort succeeded")
	}
	if sink.aborts != 1 || sink.completes != 0 {
		t.Errorf("%d Aborts, %d Completes", sink.aborts, sink.completes)
	}
}

// The writer against a model, driven by random operations: writes of any
// length, holds (valid or not), patches inside and outside the hold,
// releases. If every operation was valid, the committed bytes and sum are
// the model's; if one was not, Commit fails.
func FuzzPartWriter(f *testing.F) {
	f.Add([]byte{0, 200, 1, 0, 10, 40, 0, 255, 2, 3, 5, 3, 0, 100})
	f.Add([]byte{1, 0, 0, 60, 0, 30, 0, 90, 2, 50, 12, 3})
	f.Add([]byte{0, 63, 1, 0, 0, 64, 0, 10, 0, 200, 2, 0, 64})
	f.Add([]byte{0, 10, 1, 20, 0, 5, 2, 0, 3, 1, 0, 5})
	f.Add([]byte{2, 0, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const ps = 64
		if len(ops) > 3000 {
			ops = ops[:3000] // a thousand operations say all there is to say about 64-byte parts
		}
		reads := len(ops)%2 == 1 // half the runs with a sink that reads parts back
		sink := newMemSink(t, ps)
		var w *partWriter
		if reads {
			rs := newReadSink(t, ps)
			sink, w = rs.memSink, newPartWriter(context.Background(), "k", rs, ps)
		} else {
			w = newPartWriter(context.Background(), "k", sink, ps)
		}
		var model []byte
		var holding bool
		var hoff, hend int64
		valid := true
		arg := func(i int) int64 {
			if i < len(ops) {
				return int64(ops[i])
			}
			return 0
		}
		for i := 0; i+2 < len(ops) && valid; i += 3 {
			a, b := arg(i+1), arg(i+2)
			size := int64(len(model))
			switch ops[i] % 4 {
			case 0: // Write
				p := randomBytes(uint64(i), int(a*3))
				if _, err := w.Write(p); err != nil {
					t.Fatalf("write: %v", err)
				}
				model = append(model, p...)
			case 1: // Hold, near the end of what was written
				off, n := size-a+b/2, b%(ps+8)
				valid = !holding && off >= 0 && n <= ps && off >= size-size%ps
				w.Hold(off, n)
				holding, hoff, hend = true, off, off+n
			case 2: // WriteAt, usually inside the hold
				off, n := hoff+a%(hend-hoff+2)-1, b%(ps+2)
				if a > 250 {
					off = b
				}
				if n == 0 {
					break
				}
				valid = holding && off >= hoff && off+n <= hend && off+n <= size
				p := randomBytes(uint64(i)+1000, int(n))
				_, err := w.WriteAt(p, off)
				if valid != (err == nil) {
					t.Fatalf("WriteAt(%d bytes, %d) with %d..%d held of %d: %v", n, off, hoff, hend, size, err)
				}
				if valid {
					copy(model[off:], p)
				}
			case 3:
				w.Release()
				holding = false
			}
		}
		info, err := w.Commit(context.Background())
		if !valid {
			if err == nil {
				t.Fatal("Commit after a refused operation succeeded")
			}
			if sink.completes != 0 || sink.aborts != 1 {
				t.Fatalf("%d Completes, %d Aborts", sink.completes, sink.aborts)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sink.bytes(), model) || info.Sum != sumOf(model, ps) || info.Size != int64(len(model)) {
			t.Fatal("the committed object differs from the model")
		}
		if bound := map[bool]int{false: 4, true: 2}[reads]; w.allocated() > bound {
			t.Fatalf("%d part buffers (reading parts back: %v), over %d", w.allocated(), reads, bound)
		}
	})
}
