//go:build !linux

package lowprio

// Go runs f in a new goroutine; thread priorities are left alone here.
func Go(f func()) { go f() }
