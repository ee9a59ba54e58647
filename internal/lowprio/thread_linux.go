package lowprio

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Go runs f in a new goroutine on a thread of its own lowered to Nice; the
// thread ends with f, so no other goroutine ever runs on it. Never on the
// process's main thread: Go keeps that thread rather than ending it, the
// threads it makes would inherit its priority, and its priority shows as
// the whole process's. A goroutine that finds itself there holds that
// thread while f runs in another, which therefore cannot be it. Failing to
// lower (a system that forbids it) only leaves the priority as it is.
func Go(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			defer runtime.UnlockOSThread()
			done := make(chan struct{})
			go func() {
				defer close(done)
				lowered(f)
			}()
			<-done
			return
		}
		lowered(f)
	}()
}

// lowered lowers the calling goroutine's thread, which it keeps until it
// ends, and runs f there.
func lowered(f func()) {
	runtime.LockOSThread()
	if tid := unix.Gettid(); tid != unix.Getpid() {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, Nice)
	}
	f()
}
