package transfer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// TestExportIncrementalPointComposed: export of an incremental point whose
// moment's point no keeper made composes its archive from the base and
// segments in the store as it writes it out. A segment damaged in the
// store fails it, naming the segment, and leaves nothing at the target; a
// target that is not empty is refused as a conflict; whole again, it
// writes directories nats backup takes (CheckBackupDir), holding as many
// messages as the kept data held at the point, and writes nothing into
// the store.
func TestExportIncrementalPointComposed(t *testing.T) {
	b := newBed(t)
	was := map[string]uint64{}
	changedIncremental(t, b, func() {
		for _, s := range sample.NamesOf(module, local).Streams() {
			st, err := b.JS.Stream(b.Ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			was[s] = st.CachedInfo().State.Msgs
		}
	})
	st := testbed.FileStore(t, b.Dir)
	export := func(to string) (*transfer.ExportReport, error) {
		return transfer.ExportKept(b.Ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "inc", To: to,
			Compose: func(ctx context.Context, st store.Store, rec *kept.Point) (transfer.ComposedArchive, error) {
				return keeper.ComposeMoment(ctx, keeper.ComposeConfig{Store: st}, rec)
			}})
	}

	segs, _ := filepath.Glob(filepath.Join(b.Dir, "capture", module, local, "*", "s*", "bus.tar"))
	if len(segs) == 0 {
		t.Fatal("no segment archive in the store")
	}
	last := segs[len(segs)-1]
	whole, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), whole...)
	damaged[len(damaged)/2] ^= 0xff
	if err := os.WriteFile(last, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "out")
	_, err = export(to)
	if !errors.Is(err, kept.ErrFailed) || !strings.Contains(err.Error(), "segment") || !strings.Contains(err.Error(), "so nothing was exported") {
		t.Fatalf("export with a damaged segment: %v", err)
	}
	t.Logf("refused: %v", err)
	if _, err := os.Lstat(to); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed export left %s: %v", to, err)
	}

	if err := os.WriteFile(last, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := export(full); !errors.Is(err, kept.ErrConflict) {
		t.Fatalf("export into a directory that is not empty: %v; want a conflict", err)
	}
	rep, err := export(to)
	if err != nil {
		t.Fatalf("export of the incremental point: %v", err)
	}
	if !strings.Contains(rep.Said, "composed as it was written out") || len(rep.Streams) != len(was) {
		t.Fatalf("the export's report: %+v", rep)
	}
	for _, s := range rep.Streams {
		bd, err := busarchive.CheckBackupDir(b.Ctx, s.Dir)
		if err != nil {
			t.Fatalf("the exported %s: %v", s.Name, err)
		}
		if got := bd.Report.Messages; !bd.Report.Complete || got != was[s.Name] {
			t.Errorf("the exported %s holds %d messages, the stream held %d at the point", s.Name, got, was[s.Name])
		}
	}
	if moments, _ := filepath.Glob(filepath.Join(b.Dir, "points", module, local, "f1-at-*")); len(moments) != 0 {
		t.Fatalf("the export wrote the point of the moment into the store: %v", moments)
	}
}

// TestComposedIncrementalPointSealed: an incremental point of a keeper
// that encrypts is composed, by export, only with the identity (the
// directories then hold plain data, and the report says so); copy, which
// carries encrypted archives as they are stored and never decrypts,
// refuses to compose it and leaves no record in the target.
func TestComposedIncrementalPointSealed(t *testing.T) {
	sealed, opener := sealing(t)
	b := newBed(t, sealed)
	inc := changedIncremental(t, b, func() {})
	st := testbed.FileStore(t, b.Dir)
	composer := func(unseal *agecrypt.Opener) transfer.Composer {
		return func(ctx context.Context, st store.Store, rec *kept.Point) (transfer.ComposedArchive, error) {
			return keeper.ComposeMoment(ctx, keeper.ComposeConfig{Store: st, Unseal: unseal}, rec)
		}
	}
	export := func(to string, unseal *agecrypt.Opener) (*transfer.ExportReport, error) {
		return transfer.ExportKept(b.Ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "inc", To: to, Unseal: unseal, Compose: composer(unseal)})
	}
	to := filepath.Join(t.TempDir(), "out")
	if _, err := export(to, nil); !errors.Is(err, kept.ErrLocked) {
		t.Fatalf("export of a sealed incremental point without the identity: %v; want locked", err)
	}
	if _, err := os.Lstat(to); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused export left %s: %v", to, err)
	}
	rep, err := export(to, opener)
	if err != nil || !strings.Contains(rep.Said, "encrypted at rest") {
		t.Fatalf("export of a sealed incremental point with the identity: %+v, %v", rep, err)
	}
	for _, s := range rep.Streams {
		if _, err := busarchive.CheckBackupDir(b.Ctx, s.Dir); err != nil {
			t.Fatalf("the exported %s: %v", s.Name, err)
		}
	}

	target := t.TempDir()
	crep, err := transfer.CopyStores(b.Ctx, st, testbed.FileStore(t, target), module, local, nil, composer(nil))
	if !errors.Is(err, kept.ErrFailed) || len(crep.Failed) != 1 || !strings.Contains(crep.Failed[0], "copy does not decrypt") {
		t.Fatalf("copy of a sealed incremental point: %+v, %v", crep, err)
	}
	if _, err := os.Stat(filepath.Join(target, inc.Point.Dir, "point.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused copy left a record in the target: %v", err)
	}
}
