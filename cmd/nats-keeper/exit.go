package main

import "github.com/nats-keeper/nats-keeper/kept"

// The CLI's exit codes, as the README and `nats-keeper --help` list them:
// kept's, which maps them from the error's kind (kept.KindOf) in one table
// with the wire codes.
const (
	exitOK        = kept.ExitOK
	exitFailed    = kept.ExitFailed
	exitUsage     = kept.ExitUsage
	exitNotFound  = kept.ExitNotFound
	exitBusy      = kept.ExitBusy
	exitNoService = kept.ExitNoService
	exitDenied    = kept.ExitDenied
	exitLocked    = kept.ExitLocked
	exitCutShort  = kept.ExitCutShort
)

// exitCode is the documented exit code for err.
func exitCode(err error) int { return kept.ExitCode(err) }
