// Package lowprio runs background work (hashing a verification, capturing a
// kept data) at a lower CPU priority where the system allows it, so that
// the kernel runs it on a core the server and its writers leave idle rather
// than take the core from them. It cannot starve the work: the kernel still
// runs it, with a smaller share of a core while every core is busy.
package lowprio

// Nice is the nice value of the threads Go and Run lower.
const Nice = 10

// Run runs f on a thread of its own lowered to Nice and returns when f
// returns (see Go).
func Run(f func()) {
	done := make(chan struct{})
	Go(func() {
		defer close(done)
		f()
	})
	<-done
}
