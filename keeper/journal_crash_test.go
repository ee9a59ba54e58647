package keeper_test

import (
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestRecoverOlderJournal stops a restore, then rewrites its journal in the
// shape keepers wrote before journal bodies had parts (the positions in the
// head, no parts): a keeper started again reads it and finishes the
// restore, the module's consumer on the shared stream set back.
func TestRecoverOlderJournal(t *testing.T) {
	n := sample.NamesOf(module, local)
	for _, c := range []struct {
		step   string
		absent bool
	}{{"journal-written", false}, {"removed:" + n.KVStream, false}, {"journal-written", true}} {
		name := c.step
		if c.absent {
			name = "into-absent/" + name
		}
		t.Run(name, func(t *testing.T) {
			e, stop := crashEnv(t, c.step)
			point := e.kept()
			at := consumer(t, e.shared(), e.names.Events)
			e.snapshot(1, "fp")
			e.change()
			if c.absent {
				e.removeKept()
			}
			stop()
			if head := journalHead(t, e); !strings.Contains(head, `"reposition":{"parts":`) {
				t.Errorf("the journal's head does not name parts: %.300s", head)
			}
			if keys := partKeys(t, e); len(keys) == 0 {
				t.Error("the journal's body has no parts in the index")
			}

			if err := e.k.MakeJournalOld(e.ctx, module, local); err != nil {
				t.Fatal(err)
			}
			if head := journalHead(t, e); !strings.Contains(head, `"reposition":[{`) || !strings.Contains(head, `"expect":[{`) {
				t.Fatalf("the journal is not in the older shape: %.300s", head)
			}
			if keys := partKeys(t, e); len(keys) != 0 {
				t.Fatalf("parts left beside an older journal: %v", keys)
			}
			recoverAfterCrash(t, e, c.step, point)
			if got := consumer(t, e.shared(), e.names.Events); got.AckFloor != at.AckFloor {
				t.Errorf("%s: ack floor %d after recovery, want %d as recorded", e.names.Events, got.AckFloor, at.AckFloor)
			}
			noJournal(t, e)
		})
	}
}

// TestJournalPartsLeftOver stops a restore between the parts of its
// journal's body and its head, and between removing the head of its
// closed journal and its parts: recovery removes the parts that no head
// names, and changes nothing else.
func TestJournalPartsLeftOver(t *testing.T) {
	for _, c := range []struct {
		step string
		done bool // the restore was done when it stopped
	}{{"journal-parts-written", false}, {"journal-head-removed", true}} {
		t.Run(c.step, func(t *testing.T) {
			e, stop := crashEnv(t, c.step)
			point := e.kept()
			e.snapshot(1, "fp")
			e.change()
			live := e.kept()
			stop()
			if _, err := e.bus.Get(e.ctx, "journal."+module+"."+local); err == nil {
				t.Error("a journal head is in the index")
			}
			if keys := partKeys(t, e); len(keys) == 0 {
				t.Fatal("no parts were left to remove")
			}
			want := live
			if c.done {
				want = point
			}
			if d := diffKept(e, want); d != "" {
				t.Errorf("the kept data is not as the stopped restore left it:\n%s", d)
			}
			k2, err := e.keeperOn(e.dir)
			if err != nil {
				t.Fatal(err)
			}
			said, err := k2.Recover(e.ctx)
			if err != nil || len(said) != 0 {
				t.Errorf("recover: %v %q, want nothing to recover", err, said)
			}
			noJournal(t, e)
			if d := diffKept(e, want); d != "" {
				t.Errorf("recovery changed the kept data:\n%s", d)
			}
		})
	}
}

// TestJournalPartsOfARestoreUnderWay holds a restore right after it wrote
// its journal's body, before the head: another keeper's recovery leaves
// those parts alone (the restore holds the kept data's lease), and the
// restore then finishes.
func TestJournalPartsOfARestoreUnderWay(t *testing.T) {
	reached, goOn := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if s == "journal-parts-written" {
				close(reached)
				<-goOn
			}
		}
	})
	point := e.kept()
	e.snapshot(1, "fp")
	e.change()
	done := make(chan error, 1)
	go func() {
		_, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the restore ended before its journal's body was written: %v", err)
	}
	parts := partKeys(t, e)
	k2, err := e.keeperOn(e.dir)
	if err == nil {
		_, err = k2.Recover(e.ctx)
	}
	close(goOn)
	if err != nil {
		t.Errorf("recover while a restore is under way: %v", err)
	}
	if got := partKeys(t, e); len(parts) == 0 || strings.Join(got, ",") != strings.Join(parts, ",") {
		t.Errorf("parts of the journal under way: %v before recovery, %v after", parts, got)
	}
	if err := <-done; err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if d := diffKept(e, point); d != "" {
		t.Errorf("after the restore the kept data is not the point:\n%s", d)
	}
	noJournal(t, e)
}

// journalHead is the journal head's JSON in e's index.
func journalHead(t *testing.T, e *env) string {
	t.Helper()
	data, err := e.bus.Get(e.ctx, "journal."+module+"."+local)
	if err != nil {
		t.Fatalf("the journal's head: %v", err)
	}
	return string(data)
}

// partKeys are the keys of journal bodies' parts in e's index.
func partKeys(t *testing.T, e *env) []string {
	t.Helper()
	keys, err := e.bus.Keys(e.ctx, keeper.JournalPartPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
