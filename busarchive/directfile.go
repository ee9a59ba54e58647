package busarchive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// directChunk is the size of one direct write; directBuffers of them are in
// use at once: one being filled, the others being written.
const (
	directChunk   = 1 << 20
	directBuffers = 3
)

// DirectFile is a File that writes an archive straight to the disk
// (O_DIRECT) in aligned 1 MiB writes made by a goroutine of its own, while
// the caller fills the next buffer. An archive is written once and read back
// only by a verify or a restore (which read it with O_DIRECT too), so the
// page cache would only cost: the kernel's copy, its bookkeeping and its
// writeback, and memory taken from the bus's hot data. What is not a whole
// aligned block (the archive's tail) and the tar-header patches that WriteAt
// makes go through the ordinary descriptor; Sync flushes everything and
// fsyncs, which alone makes the archive durable, as before.
//
// It must start on an empty file. Close releases the direct descriptor and the
// goroutine, not the file. Where O_DIRECT cannot be used (the file system
// refuses it), every write goes through the ordinary descriptor.
type DirectFile struct {
	f *os.File // the ordinary descriptor: tail, patches, Sync
	d *os.File // the O_DIRECT descriptor

	cur    []byte // the buffer being filled
	curOff int64  // file offset of cur[0], a multiple of directChunk
	synced bool   // after Sync every write goes through f

	jobs    chan directJob
	free    chan []byte
	pending sync.WaitGroup // jobs handed over and not yet written
	mu      sync.Mutex
	err     error // the first failure of the writing goroutine
	closed  bool

	fellBack atomic.Bool // a direct write was refused: all go through f
}

type directJob struct {
	buf []byte
	off int64
}

// NewDirectFile writes f (empty, at offset 0) with O_DIRECT, or returns nil
// where it cannot (the caller then writes f itself).
func NewDirectFile(f *os.File) *DirectFile {
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		return nil
	}
	if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
		return nil
	}
	d := openDirectWrite(f)
	if d == nil {
		return nil
	}
	df := &DirectFile{f: f, d: d, jobs: make(chan directJob, directBuffers), free: make(chan []byte, directBuffers)}
	for range directBuffers - 1 {
		df.free <- alignedBuffer(directChunk)[:0]
	}
	df.cur = alignedBuffer(directChunk)[:0]
	go df.run()
	return df
}

// run writes the jobs in order. A write the file system refuses (EINVAL)
// is made through the ordinary descriptor instead, and so is every later one.
func (df *DirectFile) run() {
	viaF := false
	for j := range df.jobs {
		if df.failed() == nil {
			var err error
			if !viaF {
				err = pwriteAll(df.d, j.buf, j.off)
				if errors.Is(err, syscall.EINVAL) {
					viaF = true
					df.fellBack.Store(true)
				}
			}
			if viaF {
				err = pwriteAll(df.f, j.buf, j.off)
			}
			if err != nil {
				df.mu.Lock()
				if df.err == nil {
					df.err = fmt.Errorf("write the archive at %d: %w", j.off, err)
				}
				df.mu.Unlock()
			}
		}
		df.free <- j.buf[:0]
		df.pending.Done()
	}
}

func (df *DirectFile) failed() error {
	df.mu.Lock()
	defer df.mu.Unlock()
	return df.err
}

// Write appends p.
func (df *DirectFile) Write(p []byte) (int, error) {
	if err := df.failed(); err != nil {
		return 0, err
	}
	if df.synced || df.closed { // the buffer is empty
		n, err := df.f.WriteAt(p, df.curOff)
		df.curOff += int64(n)
		return n, err
	}
	n := 0
	for len(p) > 0 {
		k := copy(df.cur[len(df.cur):cap(df.cur)], p)
		df.cur = df.cur[:len(df.cur)+k]
		p, n = p[k:], n+k
		if len(df.cur) == cap(df.cur) {
			df.pending.Add(1)
			df.jobs <- directJob{buf: df.cur, off: df.curOff}
			df.curOff += int64(len(df.cur))
			df.cur = <-df.free
		}
	}
	return n, nil
}

// WriteAt writes p at off, which must lie within what was written: the part
// still in the buffer is changed there, the part handed over is written
// through the ordinary descriptor once the direct writes before it are done.
func (df *DirectFile) WriteAt(p []byte, off int64) (int, error) {
	if err := df.failed(); err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	if off < 0 || end > df.curOff+int64(len(df.cur)) {
		return 0, fmt.Errorf("write at %d..%d, beyond the %d bytes written", off, end, df.curOff+int64(len(df.cur)))
	}
	if df.synced || df.closed {
		return df.f.WriteAt(p, off)
	}
	if end > df.curOff { // the part in the buffer
		from := max(off, df.curOff)
		copy(df.cur[from-df.curOff:], p[from-off:])
		p = p[:max(0, df.curOff-off)]
	}
	if len(p) > 0 { // the part handed over
		df.pending.Wait()
		if err := df.failed(); err != nil {
			return 0, err
		}
		if _, err := df.f.WriteAt(p, off); err != nil {
			return 0, err
		}
	}
	return int(end - off), nil
}

// Sync writes what is buffered and fsyncs the file. Later writes go through
// the ordinary descriptor.
func (df *DirectFile) Sync() error {
	if !df.synced && !df.closed {
		df.pending.Wait()
		if len(df.cur) > 0 {
			if _, err := df.f.WriteAt(df.cur, df.curOff); err != nil {
				return fmt.Errorf("write the end of the archive: %w", err)
			}
		}
		df.curOff += int64(len(df.cur))
		df.cur = df.cur[:0]
		df.synced = true
	}
	if err := df.failed(); err != nil {
		return err
	}
	return df.f.Sync()
}

// Close stops the writing goroutine and closes the direct descriptor, after
// the writes in flight; what is still buffered is not written (call Sync
// first). It does not close the file. It may be called more than once.
func (df *DirectFile) Close() error {
	if df.closed {
		return nil
	}
	df.closed = true
	close(df.jobs)
	df.pending.Wait()
	df.curOff += int64(len(df.cur))
	df.cur = nil
	return df.d.Close()
}

// SyscallConn is the ordinary descriptor's, for the writer's writeback
// hints (they find nothing to do for what was written directly).
func (df *DirectFile) SyscallConn() (syscall.RawConn, error) { return df.f.SyscallConn() }

func pwriteAll(f *os.File, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := f.WriteAt(p, off)
		if err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}
