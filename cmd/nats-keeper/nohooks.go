//go:build !testhooks

package main

import (
	"log/slog"
	"time"

	"github.com/nats-keeper/nats-keeper/verbs"
)

// The test hooks of a release build: none. crashhook.go, built with
// -tags testhooks only, has the hooks the tests set through the environment;
// these stand-ins read no variable and change nothing, so a release binary
// holds neither the hooks nor their variables' names.

// crashHook returns no step hook.
func crashHook(*slog.Logger) func(string) { return nil }

// hangHook returns no middleware.
func hangHook(*slog.Logger) verbs.Middleware { return nil }

// clockHook returns no clock: the keeper's is the real one.
func clockHook(*slog.Logger) func() time.Time { return nil }

// scheduleTickHook returns 0, the default schedule tick.
func scheduleTickHook(*slog.Logger) time.Duration { return 0 }
