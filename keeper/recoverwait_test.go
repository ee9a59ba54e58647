package keeper_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// A stream a stopped restore left that still changes when recovery comes
// is not set aside while it grows: the kept data waits (its verbs refused,
// saying why) and nothing is removed; once it stops changing, the next
// round sets it aside whole and finishes the restore, and every message
// written meanwhile is live or in that aside.
func TestRecoveryWaitsForAStreamStillWritten(t *testing.T) {
	n := sample.NamesOf(module, local)
	e, stop := crashEnv(t, "mid-restore:"+n.Stream)
	e.snapshot(1, "fp")
	e.change()
	stop()
	// The module makes its stream again if the dead keeper's restore left
	// none, as an app does.
	if _, err := e.js.Stream(e.ctx, n.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: n.Stream, Subjects: []string{module + "." + local + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var written []string
	done, ended := make(chan struct{}), make(chan struct{})
	go func() { // the module, writing through the crash
		defer close(ended)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			text := fmt.Sprintf("written while recovery waits, #%d", i)
			if _, err := e.js.Publish(e.ctx, module+"."+local+".orders.after", []byte(text)); err == nil {
				mu.Lock()
				written = append(written, text)
				mu.Unlock()
			}
		}
	}()
	// The server takes writes once it gave the dead keeper's restore up.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		got := len(written)
		mu.Unlock()
		if got > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the half-restored stream took no write within a minute")
		}
	}
	k2, err := e.keeperOn(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	keeper.SetSettle(k2, 500*time.Millisecond, 2*time.Second)
	rec, err := k2.Recover(e.ctx)
	if w := rec.Waiting(); err != nil || len(w) != 1 || !strings.Contains(w[0].Err.Error(), "still changes") {
		t.Fatalf("recovery while the module writes: %v %+v; want the kept data waiting, its stream still changing", err, rec)
	}
	if _, err := k2.SnapshotKept(e.ctx, req(2, "meanwhile")); !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "still changes") {
		t.Errorf("snapshot-kept while recovery waits: %v; want a conflict saying why", err)
	}
	if len(k2.RecoveryWaits()) != 1 {
		t.Errorf("RecoveryWaits: %+v, want the kept data", k2.RecoveryWaits())
	}

	close(done)
	<-ended
	rec, err = k2.Recover(e.ctx)
	if err != nil || len(rec.Said()) != 1 || len(rec.Waiting()) != 0 || len(k2.RecoveryWaits()) != 0 {
		t.Fatalf("recovery once the writes stopped: %v %+v", err, rec)
	}
	kept := map[string]bool{}
	for _, m := range streamTexts(e.kept(), n.Stream) {
		kept[m] = true
	}
	ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
	for _, a := range ents {
		for _, m := range streamTexts(archiveStreams(t, filepath.Join(e.dir, "aside", a.Name())), n.Stream) {
			kept[m] = true
		}
	}
	for _, w := range written {
		if !kept[w] {
			t.Errorf("the module's write %q is neither live nor in an aside", w)
		}
	}
	t.Logf("%d writes through the crash, all kept; recovery said: %s", len(written), rec.Said()[0])
}

// A journal recovery cannot read (a newer keeper's, or damaged) holds back
// only its own kept data: in the same round, another kept data's
// interrupted restore is finished.
func TestUnreadableJournalWaitsAlone(t *testing.T) {
	e, stop := crashEnv(t, "journal-written")
	point := e.kept()
	e.snapshot(1, "fp")
	e.change()
	stop()
	if err := e.bus.Put(e.ctx, "journal.spare.data", []byte(`{"module":"spare","local":"data","format":99`)); err != nil {
		t.Fatal(err)
	}
	k2, err := e.keeperOn(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := k2.Recover(e.ctx)
	w := rec.Waiting()
	if err != nil || len(rec.Said()) != 1 || len(w) != 1 || w[0].Module != "spare" || w[0].Local != "data" || !strings.Contains(w[0].Err.Error(), "unreadable") {
		t.Fatalf("recovery beside an unreadable journal: %v %+v; want %s/%s done and spare/data waiting", err, rec, module, local)
	}
	if d := sample.Diff(point, e.kept()); d != "" {
		t.Errorf("after recovery the kept data is not the point:\n%s", d)
	}
	if got := k2.RecoveryWaits(); len(got) != 1 || got[0].Since.IsZero() {
		t.Errorf("RecoveryWaits: %+v", got)
	}
}
