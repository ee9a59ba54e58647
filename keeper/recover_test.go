package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

type crash struct{ step string }

// crashBus puts in front of c's bus one that panics in the middle of
// restoring stream, after the server got part of it: a keeper that dies
// mid-stream.
func crashBus(c *keeper.Config, stream string) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnRestore(func(ctx context.Context, s string, data, meta io.Reader, next fault.RestoreFunc) error {
		if s == stream {
			next(ctx, s, io.LimitReader(data, 2000), meta)
			panic(crash{"mid-restore:" + s})
		}
		return next(ctx, s, data, meta)
	})
}

// TestRecoverAfterCrash stops a restore at each step, as a killed keeper
// would, then starts a new keeper on the same directory. Recovery must end
// with the kept data whole on the bus (here: the point, completed), the aside
// complete, and no journal left.
func TestRecoverAfterCrash(t *testing.T) {
	for _, step := range liveCrashSteps() {
		t.Run(step, func(t *testing.T) {
			e, stop := crashEnv(t, step)
			point := e.kept()
			e.snapshot(1, "fp")
			e.change()
			live := e.kept()

			stop()
			recoverAfterCrash(t, e, step, point)
			checkAsidesOf(t, e, live, point)
			if keys, _ := e.bus.Keys(e.ctx, "journal."); len(keys) != 0 {
				t.Errorf("journal left: %v", keys)
			}
		})
	}
}

// liveCrashSteps are the steps of a restore with live data that the crash
// tests stop it at: every hook step, and the middle of two streams' data.
func liveCrashSteps() []string {
	n := sample.NamesOf(module, local)
	return []string{
		"journal-written",
		"remove:" + n.KVStream,
		"removed:" + n.KVStream,
		"removed:" + n.Stream,
		"restored:" + n.KVStream,
		"restored:" + n.Stream,
		"mid-restore:" + n.ObjStrm,
		"mid-restore:" + n.Stream,
		"positions-set",
	}
}

// crashEnv is an env whose keeper stops restoring at step, as a killed keeper
// would: at a step hook, or ("mid-restore:<stream>") in the middle of that
// stream's data. stop runs restore-kept until it stops there. opts set up
// the keeper further.
func crashEnv(t *testing.T, step string, opts ...envOption) (e *env, stop func()) {
	t.Helper()
	var hookOn bool
	e = newEnv(t, append(opts, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn && s == step {
				panic(crash{s})
			}
		}
		if strings.HasPrefix(step, "mid-restore:") {
			crashBus(c, strings.TrimPrefix(step, "mid-restore:"))
		}
	})...)
	return e, func() {
		t.Helper()
		hookOn = true
		defer func() {
			hookOn = false
			if _, ok := recover().(crash); !ok {
				t.Fatalf("the restore did not stop at %s", step)
			}
		}()
		e.k.RestoreKept(e.ctx, req(1, "fp"))
	}
}

// recoverOnce starts a new keeper on e's directory and bus and recovers;
// exactly one interrupted restore must be taken up. It returns the keeper
// and what recovery said of it.
func recoverOnce(t *testing.T, e *env) (*keeper.Keeper, string) {
	t.Helper()
	k2, err := e.keeperOn(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := k2.Recover(e.ctx)
	said := rec.Said()
	if err != nil || len(said) != 1 || len(rec) != 1 {
		t.Fatalf("recover: %v %+v", err, rec)
	}
	return k2, said[0]
}

// recoverAfterCrash starts a new keeper on e's directory and bus and
// recovers: one restore must be completed, the kept data must be the point,
// no journal left in the index, and a second recovery must find nothing. It
// returns the new keeper.
func recoverAfterCrash(t *testing.T, e *env, step string, point *sample.Snapshot) *keeper.Keeper {
	t.Helper()
	k2, said := recoverOnce(t, e)
	mustContain(t, said, "was completed")
	if d := sample.Diff(point, e.kept()); d != "" {
		t.Errorf("after recovery from a crash at %s the kept data is not the point:\n%s", step, d)
	}
	if _, err := e.bus.Get(e.ctx, "journal."+module+"."+local); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("journal left in the index: %v", err)
	}
	if again, err := k2.Recover(e.ctx); err != nil || len(again) != 0 {
		t.Errorf("second recover: %v %q", err, again)
	}
	return k2
}

func TestDiscardRefusedWhileRestoreUnfinished(t *testing.T) {
	n := sample.NamesOf(module, local)
	var hookOn bool
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn && s == "removed:"+n.KVStream {
				panic(crash{s})
			}
		}
	})
	e.snapshot(1, "fp")
	hookOn = true
	func() {
		defer func() { recover() }()
		e.k.RestoreKept(e.ctx, req(1, "fp"))
	}()
	ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
	if len(ents) != 1 {
		t.Fatalf("asides: %v", ents)
	}
	_, err := e.k.DiscardAside(e.ctx, keeper.Request{From: ents[0].Name(), Caller: "ops", Why: "tidy"})
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("discard during an unfinished restore: got %v, want conflict", err)
	}
}

// TestRecoverAfterCrashIntoAbsentData stops a restore into absent kept data
// at each step, as a killed keeper would, then starts a new keeper on the
// same directory and bus. Its journal, in the index only, lets recovery take
// the restore up again: whatever the first restore left on the bus is set
// aside (complete and verified), never just deleted, and the kept data ends
// as the point, with no journal left.
func TestRecoverAfterCrashIntoAbsentData(t *testing.T) {
	n := sample.NamesOf(module, local)
	steps := []string{
		"journal-written",
		"restored:" + n.KVStream,
		"mid-restore:" + n.Stream,
		"positions-set",
	}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			e, stop := crashEnv(t, step)
			point := e.kept()
			e.snapshot(1, "fp")
			e.removeKept()

			stop()
			// Until recovery, the kept data refuses a snapshot: it may be
			// half restored.
			if _, err := e.k.SnapshotKept(e.ctx, req(2, "half")); !errors.Is(err, keeper.ErrConflict) {
				t.Errorf("snapshot-kept during an unfinished restore: got %v, want a conflict", err)
			}

			onBus := e.kept()
			k2 := recoverAfterCrash(t, e, step, point)
			present := &sample.Snapshot{}
			for _, s := range onBus.Streams {
				if !s.Missing {
					present.Streams = append(present.Streams, s)
				}
			}
			ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
			switch {
			case len(present.Streams) > 0 && len(ents) != 1:
				t.Errorf("recovery left %d aside entries, want 1 holding what the first restore left", len(ents))
			case len(present.Streams) == 0 && len(ents) != 0:
				t.Errorf("recovery with nothing on the bus left %d aside entries", len(ents))
			}
			checkAsides(t, e, present)
			if _, err := k2.SnapshotKept(e.ctx, req(2, "after")); err != nil {
				t.Errorf("snapshot-kept after recovery: %v", err)
			}
		})
	}
}

// A module that makes its bucket again while a restore into absent kept data
// is unfinished (the keeper died) loses nothing: recovery sets the bucket
// aside before it restores the point over it.
func TestRecoveryIntoAbsentDataSetsAsideWhatAppearedMeanwhile(t *testing.T) {
	n := sample.NamesOf(module, local)
	e, stop := crashEnv(t, "journal-written")
	point := e.kept()
	e.snapshot(1, "fp")
	e.removeKept()
	stop()
	kv, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: n.Bus})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(e.ctx, "written-meanwhile", "keep me"); err != nil {
		t.Fatal(err)
	}
	meanwhile := e.kept()

	recoverAfterCrash(t, e, "journal-written", point)
	ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
	if len(ents) != 1 {
		t.Fatalf("recovery left %d aside entries, want 1 holding the bucket made meanwhile", len(ents))
	}
	got := archiveStreams(t, filepath.Join(e.dir, "aside", ents[0].Name()))
	if d := sample.Diff(&sample.Snapshot{Streams: []sample.StreamDump{meanwhile.Streams[0]}}, got); d != "" || meanwhile.Streams[0].Name != n.KVStream {
		t.Errorf("the aside does not hold the bucket made meanwhile (%s):\n%s", meanwhile.Streams[0].Name, d)
	}
}

// TestRecoverAfterCrashKeepsWhatTheModuleWrote stops a restore with live
// data at each step, as a killed keeper would; before a keeper comes back,
// the module writes 3 messages into its stream (making the stream again if
// it finds it missing). Recovery must leave every one of those writes live
// on the bus or in a complete set-aside copy.
func TestRecoverAfterCrashKeepsWhatTheModuleWrote(t *testing.T) {
	n := sample.NamesOf(module, local)
	for _, step := range liveCrashSteps() {
		t.Run(step, func(t *testing.T) {
			e, stop := crashEnv(t, step)
			e.snapshot(1, "fp")
			e.change()
			stop()
			written := moduleWrites(t, e, step)

			k2, said := recoverOnce(t, e)
			t.Logf("recovery said: %s", said)
			kept := map[string]string{}
			for _, m := range streamTexts(e.kept(), n.Stream) {
				kept[m] = "live"
			}
			ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
			for _, a := range ents {
				for _, m := range streamTexts(archiveStreams(t, filepath.Join(e.dir, "aside", a.Name())), n.Stream) {
					if kept[m] == "" {
						kept[m] = "aside " + a.Name()
					}
				}
			}
			for _, w := range written {
				if kept[w] == "" {
					t.Errorf("the module's write %q after a crash at %s is neither live nor in an aside", w, step)
				}
			}
			// A recovery aside can be put back like any other.
			list, _ := k2.ListKept(e.ctx, keeper.Request{})
			for _, a := range list.Asides {
				if a.Reason != keeper.ReasonRecovery {
					continue
				}
				back := req(0, "")
				back.From = "aside/" + a.ID
				if _, err := k2.RestoreKept(e.ctx, back); err != nil {
					t.Fatalf("putting the recovery aside %s back: %v", a.ID, err)
				}
				live := streamTexts(e.kept(), n.Stream)
				for _, w := range written {
					if kept[w] == "aside "+a.ID && !slices.Contains(live, w) {
						t.Errorf("after putting the recovery aside back, the write %q is not live", w)
					}
				}
			}
			if _, err := e.bus.Get(e.ctx, "journal."+module+"."+local); !errors.Is(err, keeper.ErrNotFound) {
				t.Errorf("journal left in the index: %v", err)
			}
		})
	}
}

// moduleWrites is the module writing 3 messages into its stream after the
// keeper died, making the stream again if it is missing, as an app does.
func moduleWrites(t *testing.T, e *env, step string) []string {
	t.Helper()
	n := sample.NamesOf(module, local)
	if _, err := e.js.Stream(e.ctx, n.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: n.Stream, Subjects: []string{module + "." + local + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for i := range 3 {
		text := fmt.Sprintf("written after a crash at %s, #%d", step, i)
		var err error
		for try := 0; try < 50; try++ { // a stream the dead keeper left restoring accepts writes once the server ends that restore
			if _, err = e.js.Publish(e.ctx, module+"."+local+".orders.after", []byte(text)); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("the module could not write into %s: %v", n.Stream, err)
		}
		out = append(out, text)
	}
	return out
}

// streamTexts is the payloads of one stream of a dump.
func streamTexts(d *sample.Snapshot, stream string) []string {
	var out []string
	for _, s := range d.Streams {
		if s.Name == stream {
			for _, m := range s.Messages {
				out = append(out, m.Text)
			}
		}
	}
	return out
}

// TestPutBackCrashKeepsItsSource: a keeper that dies while it puts an aside
// back leaves a journal naming that aside; until recovery finishes, the
// aside cannot be discarded, and recovery completes the put-back.
func TestPutBackCrashKeepsItsSource(t *testing.T) {
	var hookOn bool
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn && s == "restored:"+sample.NamesOf(module, local).KVStream {
				panic(crash{s})
			}
		}
	})
	original := e.kept()
	only := req(0, "")
	only.AsideOnly = true
	a, err := e.k.RestoreKept(e.ctx, only)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(e.ctx, e.js, module, local); err != nil {
		t.Fatal(err)
	}
	e.change()
	back := req(0, "")
	back.From = "aside/" + a.Aside.ID
	hookOn = true
	func() {
		defer func() { recover() }()
		e.k.RestoreKept(e.ctx, back)
	}()
	hookOn = false
	if _, err := e.k.DiscardAside(e.ctx, keeper.Request{From: a.Aside.ID, Caller: "ops", Why: "tidy"}); !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("discarding the aside an unfinished put-back restores from: got %v, want a conflict", err)
	}
	recoverAfterCrash(t, e, "put-back", original)
}
