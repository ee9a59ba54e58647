//go:build !unix

package keeper

// processAlive cannot tell off Unix, so it says yes: the lease expires.
func processAlive(pid int) bool { return true }
