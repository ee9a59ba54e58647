package main

import "github.com/nats-keeper/nats-keeper/kept"

// The CLI's exit codes, as the README and `nats-keeper --help` list them,
// are kept's (kept.ExitOK, ...): one table maps them from the error's kind
// (kept.KindOf), with the wire codes. These are the ones the CLI gives
// without an error.
const (
	exitOK    = kept.ExitOK
	exitUsage = kept.ExitUsage
)

// exitCode is the documented exit code for err.
func exitCode(err error) int { return kept.ExitCode(err) }
