package main

import "github.com/nats-keeper/nats-keeper/keeper"

// The CLI's exit codes, as the README and `nats-keeper --help` list them.
// They are mapped from the error's kind (keeper.KindOf) here, and nowhere
// else.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitNotFound  = 3
	exitBusy      = 4
	exitNoService = 5
	exitDenied    = 6
	exitLocked    = 7
	exitCutShort  = 8
)

// exitCode is the documented exit code for err.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	switch keeper.KindOf(err) {
	case keeper.ErrBadRequest:
		return exitUsage
	case keeper.ErrNotFound:
		return exitNotFound
	case keeper.ErrBusy, keeper.ErrConflict:
		return exitBusy
	case keeper.ErrNoBus:
		return exitNoService
	case keeper.ErrDenied:
		return exitDenied
	case keeper.ErrLocked:
		return exitLocked
	case keeper.ErrCutShort:
		return exitCutShort
	default:
		return exitFailed
	}
}
