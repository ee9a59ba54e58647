package keeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// RecoveryState says how one round of recovery left one kept data.
type RecoveryState string

const (
	// RecoveryDone: the interrupted restore was finished or rolled back;
	// the kept data is whole on the bus and its verbs are served again.
	RecoveryDone RecoveryState = "done"
	// RecoveryWaits: recovery could not finish it now; the kept data's
	// journal stays, its verbs are refused (unfinished), and the next
	// round tries again. No other kept data waits on it.
	RecoveryWaits RecoveryState = "waits"
)

// RecoveryOutcome is what one round of Recover did for one kept data.
type RecoveryOutcome struct {
	Module string
	Local  string
	State  RecoveryState
	Said   string    // done: what recovery did, one sentence
	Err    error     // waits: why, a sentence that says what ends the wait
	Since  time.Time // waits: when this keeper first found it waiting
}

// Recovery is what one round of Recover did: one outcome per kept data
// whose restore journal it took up or could not read. A kept data a verb
// holds (its restore is running, not interrupted) is in none.
type Recovery []RecoveryOutcome

// Said is what the round finished or rolled back, a sentence each.
func (r Recovery) Said() []string {
	var out []string
	for _, o := range r {
		if o.State == RecoveryDone {
			out = append(out, o.Said)
		}
	}
	return out
}

// Waiting is the kept data the round could not recover.
func (r Recovery) Waiting() []RecoveryOutcome {
	var out []RecoveryOutcome
	for _, o := range r {
		if o.State == RecoveryWaits {
			out = append(out, o)
		}
	}
	return out
}

func done(module, local, said string) RecoveryOutcome {
	return RecoveryOutcome{Module: module, Local: local, State: RecoveryDone, Said: said}
}

func waits(module, local string, err error) RecoveryOutcome {
	return RecoveryOutcome{Module: module, Local: local, State: RecoveryWaits, Err: err}
}

// recoveryWaits is the kept data the last round of recovery left waiting,
// by module/local: what metrics, health and the refusal of a verb report.
type recoveryWaits struct {
	mu sync.Mutex
	m  map[string]RecoveryOutcome
	// quiet and bound: settle's; zero takes settleQuiet and settleBound.
	quiet, bound time.Duration
}

// note makes rec's waits the ones reported: a kept data still waiting
// keeps the time it first waited; one not in rec waits no more.
func (w *recoveryWaits) note(rec Recovery, now time.Time) Recovery {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := map[string]RecoveryOutcome{}
	for i, o := range rec {
		if o.State != RecoveryWaits {
			continue
		}
		key := o.Module + "/" + o.Local
		o.Since = now
		if was, ok := w.m[key]; ok {
			o.Since = was.Since
		}
		rec[i], next[key] = o, o
	}
	w.m = next
	return rec
}

func (w *recoveryWaits) of(module, local string) (RecoveryOutcome, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.m[module+"/"+local]
	return o, ok
}

// RecoveryWaits is the kept data the last round of recovery could not
// recover, sorted by module and kept data, each with why and since when.
func (k *Keeper) RecoveryWaits() []RecoveryOutcome {
	k.waits.mu.Lock()
	defer k.waits.mu.Unlock()
	out := make([]RecoveryOutcome, 0, len(k.waits.m))
	for _, o := range k.waits.m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b RecoveryOutcome) int {
		return cmp.Or(strings.Compare(a.Module, b.Module), strings.Compare(a.Local, b.Local))
	})
	return out
}

// waitSaid is the refusal's clause for a kept data that waits for
// recovery: why, since when, and what ends the wait; or that recovery has
// not tried it yet.
func (k *Keeper) waitSaid(module, local string) string {
	o, ok := k.waits.of(module, local)
	if !ok {
		return "recovery finishes or undoes it (a serving keeper takes it up as it starts and every 15 s)"
	}
	return fmt.Sprintf("recovery waits since %s: %v; the keeper tries again by itself, and the wait ends once recovery finishes or undoes the restore",
		o.Since.UTC().Format(time.RFC3339), o.Err)
}

// journalKeyParts is the module and kept data of a journal.<module>.<local>
// key, or "", "" when it is not one.
func journalKeyParts(key string) (module, local string) {
	rest, ok := strings.CutPrefix(key, "journal.")
	if !ok {
		return "", ""
	}
	module, local, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(local, ".") {
		return "", ""
	}
	return module, local
}

// The server's restore of a stream goes on after the client that sent it
// died: nats-server (processStreamRestore in jetstream_api.go, v2.15) keeps
// storing the chunks it already received, through a pipe into
// RestoreStreamV2 (stream_backup.go), and gives the restore up only when
// no chunk has been written for its activityInterval, 5 s; the stream it
// made stays, half restored. So a stream whose messages have not changed
// for longer than that, with a margin for a busy server, is no longer
// being restored; one that still changes after settleBound is being
// written by someone (a module), and recovery waits for it.
const (
	restoreStall = 5 * time.Second
	settleQuiet  = restoreStall + 2*time.Second
	settleBound  = time.Minute
	settlePoll   = 250 * time.Millisecond
)

// streamMark is what changes in a stream while messages are stored into it.
type streamMark struct{ first, last, msgs, bytes uint64 }

// settle waits until none of streams has changed for settleQuiet, at most
// settleBound; a stream missing at the first look counts as settled (the
// server makes the stream it restores as soon as the first chunk comes,
// and a keeper takes longer than that to start again): recovery at the
// restore step, so that it sets aside what the dead keeper's restore left
// once the server has stopped storing it, and not while it grows. Its
// error says which stream still changes and what ends the wait.
func (k *Keeper) settle(ctx context.Context, streams []string) error {
	quiet, bound := cmp.Or(k.waits.quiet, settleQuiet), cmp.Or(k.waits.bound, settleBound)
	began := time.Now()
	marks := map[string]streamMark{}
	changed := map[string]time.Time{}
	missing := map[string]bool{}
	for first := true; ; first = false {
		now := time.Now()
		for _, s := range streams {
			si, err := k.bus.Stream(ctx, s)
			var m streamMark
			switch {
			case errors.Is(err, ErrNoStream):
				missing[s] = missing[s] || first
			case err != nil:
				return fmt.Errorf("looking up stream %s while waiting for it to settle: %w", s, err)
			default:
				m = streamMark{si.FirstSeq, si.LastSeq, si.Messages, si.Bytes}
			}
			if was, ok := marks[s]; !ok || was != m {
				marks[s], changed[s] = m, now
			}
		}
		still := ""
		for _, s := range streams {
			if !missing[s] && now.Sub(changed[s]) < quiet {
				still = s
			}
		}
		if still == "" {
			return nil
		}
		if now.Sub(began) >= bound {
			return Errorf(ErrConflict, "stream %s still changes %s after recovery began to wait for it (it waits until nothing has been stored into it for %s): "+
				"a module writes into it; stop the module's writers, or let them pause, to end the wait", still, bound, quiet)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// restoring is the journal's streams a restore may have begun and not
// finished: the server may still be storing them.
func restoring(j *journal) []string {
	var out []string
	for _, s := range j.Restore {
		if !contains(j.Restored, s) {
			out = append(out, s)
		}
	}
	return out
}
