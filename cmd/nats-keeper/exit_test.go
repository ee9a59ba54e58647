package main

import "github.com/nats-keeper/nats-keeper/kept"

// The exit codes the tests expect, by their kind.
const (
	exitFailed    = kept.ExitFailed
	exitNotFound  = kept.ExitNotFound
	exitBusy      = kept.ExitBusy
	exitNoService = kept.ExitNoService
	exitDenied    = kept.ExitDenied
	exitLocked    = kept.ExitLocked
	exitCutShort  = kept.ExitCutShort
)
