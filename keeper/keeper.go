// Package keeper is nats-keeper's domain core: restore points, set-aside
// copies, plans, consumer positions, locks and the order of steps that keeps
// every byte of a kept data in at least one complete, verifiable place.
//
// It talks to the bus through Bus, to its index through Index and records acts
// through Acts; it never imports nats.go. The files under Dir are the truth;
// the index can be rebuilt from them (Rebuild).
package keeper

import (
	"context"
	"log/slog"
	"time"
)

// Config configures a Keeper.
type Config struct {
	Dir     string // the keeper's directory; made 0700 if missing
	Bus     Bus
	Index   Index
	Acts    Acts
	Logger  *slog.Logger     // nil means slog.Default()
	Version string           // the keeper's version, recorded in archives
	Now     func() time.Time // nil means time.Now
}

// Progress is reported while a long verb runs.
type Progress struct {
	Verb         string `json:"verb"`
	Module       string `json:"module"`
	Local        string `json:"local"`
	Step         string `json:"step"`   // "snapshot", "aside", "restore", "verify"
	Stream       string `json:"stream"` // the stream in progress
	StreamsDone  int    `json:"streams_done"`
	StreamsTotal int    `json:"streams_total"`
	Bytes        int64  `json:"bytes"` // archive bytes written or read so far in this step
}

type progressKey struct{}

// WithProgress returns a context whose verbs report progress to fn. fn is
// called from the verb's goroutine and must not block for long.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func progressFrom(ctx context.Context) func(Progress) {
	if fn, ok := ctx.Value(progressKey{}).(func(Progress)); ok && fn != nil {
		return fn
	}
	return func(Progress) {}
}
