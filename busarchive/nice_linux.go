package busarchive

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// hashNice is the nice value of a hashing goroutine's thread.
const hashNice = 10

// yieldThread gives the calling goroutine a thread of its own with a lower
// scheduling priority (nice hashNice), for the rest of its life; the thread
// ends with the goroutine, so no other goroutine ever runs on it.
//
// A verification's hashing takes a core for as long as it reads. During a
// restore, the server restores a stream on one core and its writes and the
// keeper's upload share the other, so CPU taken by the hashing is taken from
// the server: with the hashing at nice 10, the kernel runs it when a core is
// otherwise idle. (1 GiB restore: 0.79× → 0.75× of the nats CLI's time.) It
// cannot starve: the hashing must keep up before a restore's end is sent.
//
// On the process's main thread it does nothing: Go keeps that thread rather
// than ending it, and its priority shows as the whole process's.
func yieldThread() {
	runtime.LockOSThread()
	tid := unix.Gettid()
	if tid == unix.Getpid() {
		runtime.UnlockOSThread()
		return
	}
	// Failing (a system that forbids it) only leaves the priority as it is.
	_ = unix.Setpriority(unix.PRIO_PROCESS, tid, hashNice)
}
