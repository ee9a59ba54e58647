package lowprio

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// niceOf reads a thread's nice value from /proc (field 19 of its stat).
func niceOf(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Go runs f on a thread of nice Nice, never the process's main thread,
// and the thread ends with f; Run the same, waiting for f; the test's own
// thread keeps its nice. Many in turn, so that some are started while the
// main thread is free to take them.
func TestGoLowersOnlyItsOwnThread(t *testing.T) {
	// The process may itself run niced (a test run under nice): the threads
	// left alone keep the main thread's value.
	base := niceOf(t, unix.Getpid())
	type seen struct{ tid, nice int }
	var tids []int
	for i := range 50 {
		got := make(chan seen, 1)
		f := func() {
			tid := unix.Gettid()
			got <- seen{tid, niceOf(t, tid)}
		}
		if i%2 == 0 {
			Go(f)
		} else {
			Run(f)
		}
		g := <-got
		if g.tid == unix.Getpid() {
			t.Fatalf("round %d: f ran on the main thread", i)
		}
		if g.nice != Nice {
			t.Fatalf("round %d: thread %d runs at nice %d, want %d", i, g.tid, g.nice, Nice)
		}
		tids = append(tids, g.tid)
	}
	if mine, main := niceOf(t, unix.Gettid()), niceOf(t, unix.Getpid()); mine != base || main != base {
		t.Errorf("the test's own thread runs at nice %d and the main thread at %d, want %d", mine, main, base)
	}
	// f has ended: its thread must end too, so that no other goroutine runs
	// at the lower priority.
	for _, tid := range tids {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid))
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d of an ended f is still there", tid)
			}
		}
	}
}
