//go:build linux

package busarchive

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

func TestYieldThreadLowersOnlyItsOwnThread(t *testing.T) {
	type seen struct{ tid, nice int }
	// The process may itself run niced (a test run under nice): the threads
	// left alone keep the main thread's value.
	base := niceOf(t, unix.Getpid())
	got := make(chan seen)
	go func() {
		yieldThread()
		tid := unix.Gettid()
		got <- seen{tid, niceOf(t, tid)}
	}()
	g := <-got
	if g.tid == unix.Getpid() {
		// The goroutine ran on the main thread, which is left alone.
		if g.nice != base {
			t.Errorf("the main thread runs at nice %d, want %d", g.nice, base)
		}
		return
	}
	if g.nice != hashNice {
		t.Errorf("the hashing thread runs at nice %d, want %d", g.nice, hashNice)
	}
	if mine := niceOf(t, unix.Gettid()); mine != base {
		t.Errorf("the test's own thread runs at nice %d, want %d", mine, base)
	}
	// The goroutine has ended: its thread must end too, so that no other
	// goroutine runs at the lower priority.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Stat("/proc/self/task/" + strconv.Itoa(g.tid))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d of the ended hashing goroutine is still there", g.tid)
		}
	}
}
