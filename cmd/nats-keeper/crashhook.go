package main

import (
	"log/slog"
	"os"
	"syscall"
)

// crashEnv names the restore step at which the keeper kills itself with
// SIGKILL. It exists only for crash tests, which prove that a keeper killed at
// any step recovers when it starts again; nothing else should set it.
const crashEnv = "NATS_KEEPER_CRASH_AT"

// crashHook returns the keeper's step hook: nil unless crashEnv is set.
func crashHook(log *slog.Logger) func(string) {
	at := os.Getenv(crashEnv)
	if at == "" {
		return nil
	}
	log.Warn("crash test: the keeper will kill itself at a restore step", "step", at)
	return func(step string) {
		if step == at {
			log.Warn("crash test: killing the keeper", "step", step)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
