package wiring

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// DefaultCaptureTick is how often a serving keeper looks for kept data to
// capture that no keeper captures (capture turned on, or its keeper died:
// its lease lapses and this keeper takes the capture up).
const DefaultCaptureTick = 2 * time.Second

// captureLoop runs a capture for every kept data whose capture is on and
// whose capture lease this keeper can take, until ctx ends.
func captureLoop(ctx context.Context, k *keeper.Keeper, tick time.Duration, log *slog.Logger) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	running := map[string]bool{}
	defer wg.Wait()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		recs, err := k.Captures(ctx, "", "")
		if err != nil && ctx.Err() == nil {
			log.Warn("the capture records could not be read; trying again at the next tick", "err", err)
		}
		for _, rec := range recs {
			key := rec.Module + "/" + rec.Local
			mu.Lock()
			busy := running[key]
			if rec.On && !busy {
				running[key] = true
			}
			mu.Unlock()
			if !rec.On || busy {
				continue
			}
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(running, key)
					mu.Unlock()
				}()
				err := k.RunCapture(ctx, rec.Module, rec.Local)
				switch {
				case errors.Is(err, keeper.ErrCaptureHeld), err == nil, ctx.Err() != nil:
				default:
					log.Error("a capture ended", "kept", key, "err", err)
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
