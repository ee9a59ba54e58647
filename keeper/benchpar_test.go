package keeper_test

import "github.com/nats-keeper/nats-keeper/keeper"

// benchParallel sets how many streams the benchmark's keeper takes at once.
func benchParallel(c *keeper.Config, n int, spool string) {
	c.StreamParallel, c.SpoolDir = n, spool
}
