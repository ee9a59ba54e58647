package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestRecoverDeltaAfterCrash stops a delta rollback at each of its steps,
// as a killed keeper would (after its aside is committed, after its journal
// is written, in the middle of a tail's deletes, after them, after the
// configuration is set back, in the middle of the positions), and starts a
// new keeper on the same directory and bus. Stopped before its journal,
// the kept data is the live data as it was, and the aside a complete copy
// of the tails; stopped after, recovery finishes the rollback: the kept
// data is the point's (the delta streams' last sequence the live one), the
// tails set aside, no journal left.
func TestRecoverDeltaAfterCrash(t *testing.T) {
	n := sample.NamesOf(module, local)
	for _, step := range []string{"aside-committed", "journal-written", "mid-delete:" + n.Stream, "tail-deleted:" + n.Stream,
		"config-set:" + n.Stream, "position-set:" + n.Stream + "/" + n.Audit} {
		t.Run(step, func(t *testing.T) {
			e, stop := deltaCrashEnv(t, step)
			// The kept data is the plain stream alone: a KV bucket denies
			// deletes, so a delta request for it would be refused.
			if err := e.js.DeleteKeyValue(e.ctx, e.names.Bus); err != nil {
				t.Fatal(err)
			}
			if err := e.js.DeleteObjectStore(e.ctx, e.names.Bus); err != nil {
				t.Fatal(err)
			}
			point := e.kept()
			e.snapshot(1, "fp")
			e.appendToStream(deleteBatch + 5) // more than one batch of deletes
			live := e.kept()
			stop()
			asides := asidesIn(t, e)
			if len(asides) != 1 {
				t.Fatalf("asides after the crash: %v", asides)
			}
			a := readAside(t, e, asides[0])
			tails := 0
			for _, s := range a.Streams {
				if s.Base != "" {
					tails++
				}
			}
			if tails != 1 || len(a.Streams) != 1 {
				t.Errorf("the aside holds %d tails, want the plain stream's only: %+v", tails, a.Streams)
			}
			if step == "aside-committed" {
				if d := sample.Diff(durables(live), durables(e.kept())); d != "" {
					t.Errorf("stopped before its journal, the kept data is not the live data:\n%s", d)
				}
				k2, err := e.keeperOn(e.dir)
				if err != nil {
					t.Fatal(err)
				}
				if rec, err := k2.Recover(e.ctx); err != nil || len(rec) != 0 {
					t.Errorf("recover: %v %+v, want nothing to recover", err, rec)
				}
				return
			}
			_, said := recoverOnce(t, e)
			mustContain(t, said, "was completed")
			if d := sample.Diff(rolledBack(point, live, e.names.Stream), durables(e.kept())); d != "" {
				t.Errorf("after recovery from a crash at %s the kept data is not the point:\n%s", step, d)
			}
			noJournal(t, e)
			if got := asidesIn(t, e); len(got) != 1 {
				t.Errorf("asides after recovery: %v, want the rollback's one", got)
			}
		})
	}
}

// deltaCrashEnv is crashEnv whose restore asks for method delta (auto
// restores a stream this small whole: its deletes would cost more).
func deltaCrashEnv(t *testing.T, step string) (e *env, stop func()) {
	t.Helper()
	var hookOn bool
	e = newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn && s == step {
				panic(crash{s})
			}
		}
	})
	return e, func() {
		t.Helper()
		hookOn = true
		defer func() {
			hookOn = false
			if _, ok := recover().(crash); !ok {
				t.Fatalf("the restore did not stop at %s", step)
			}
		}()
		r := req(1, "fp")
		r.Method = kept.MethodDelta
		rep, err := e.k.RestoreKept(e.ctx, r)
		t.Fatalf("the restore ended: %v %+v", err, rep)
	}
}

// deleteBatch is the keeper's bound on one call's deletes.
const deleteBatch = 1000

func asidesIn(t *testing.T, e *env) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.dir, "aside"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	return out
}

func readAside(t *testing.T, e *env, id string) *keeper.Aside {
	t.Helper()
	l, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Asides {
		if a.ID == id {
			return &a
		}
	}
	t.Fatalf("aside %s is not listed: %+v", id, l)
	return nil
}

// TestDeltaDeleteFailingMidTailFinishesLater: the bus refuses the tail's
// deletes after the first batch. The rollback goes no further, says where
// the tail is and that republishing would not keep its sequences, and
// keeps its journal; once the bus answers, recovery finishes the deletes,
// and the kept data is the point's (the last sequence the live one).
func TestDeltaDeleteFailingMidTailFinishesLater(t *testing.T) {
	var fb fault.Bus
	e := newEnv(t, fb.WrapAll)
	if err := e.js.DeleteKeyValue(e.ctx, e.names.Bus); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteObjectStore(e.ctx, e.names.Bus); err != nil {
		t.Fatal(err)
	}
	point := e.kept()
	e.snapshot(1, "fp")
	e.appendToStream(deleteBatch + 5)
	live := e.kept()
	calls := 0
	fb.OnDeleteMessages(func(ctx context.Context, stream string, seqs []uint64, next fault.DeleteMsgsFunc) error {
		if calls++; calls > 1 {
			return fmt.Errorf("%w: %w", keeper.ErrNoBus, errors.New("injected fault"))
		}
		return next(ctx, stream, seqs)
	})
	r := req(1, "fp")
	r.Method = kept.MethodDelta
	_, err := e.k.RestoreKept(e.ctx, r)
	if err == nil {
		t.Fatal("a delta whose deletes fail did not fail")
	}
	mustContain(t, err.Error(), "the restore journal stays", "republishing it would keep its data, not its sequences", "restore-kept from aside/")
	if got := e.kept().Streams[2]; got.Msgs != live.Streams[2].Msgs-deleteBatch {
		t.Errorf("after the failure the stream holds %d messages, want %d (the first batch deleted)", got.Msgs, live.Streams[2].Msgs-deleteBatch)
	}
	fb.OnDeleteMessages(nil)
	_, said := recoverOnce(t, e)
	mustContain(t, said, "was completed")
	if d := sample.Diff(rolledBack(point, live, e.names.Stream), durables(e.kept())); d != "" {
		t.Errorf("after recovery the kept data is not the point:\n%s", d)
	}
	noJournal(t, e)
}
