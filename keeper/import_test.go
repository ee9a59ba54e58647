package keeper_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// TestExportImportRoundTrip exports a point as nats backup directories,
// imports them as another point, and restores that one: the kept data is
// back as the first point took it. Importing again at the same form and
// fingerprint sets the earlier import aside (replaced), as a snapshot does.
func TestExportImportRoundTrip(t *testing.T) {
	e := newEnv(t)
	before := e.kept()
	e.snapshot(1, "orig")
	to := filepath.Join(t.TempDir(), "out")
	st := fileStore(t, e.dir)
	exp, err := transfer.ExportKept(e.ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "orig", To: to})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, s := range exp.Streams {
		dirs = append(dirs, s.Dir)
	}
	if want := e.names.Streams(); !slices.Equal(streamNamesOf(exp), want) {
		t.Fatalf("exported %v; want %v", streamNamesOf(exp), want)
	}
	mustContain(t, exp.Said, "Exported restore point billing/ledger f1-orig from file://", "3 nats backup directories")

	r := req(2, "imported")
	rep, err := e.k.ImportKept(e.ctx, r, dirs)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, rep.Said, "Imported restore point billing/ledger f2-imported from 3 nats backup directories", "3 stream(s)")
	if rep.Point == nil || rep.Point.ArchiveSize == 0 || rep.Point.ArchiveSum == "" || len(rep.Point.Positions) != 0 || rep.Aside != nil {
		t.Fatalf("imported %+v", rep.Point)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(2, "imported")); err != nil {
		t.Fatalf("the imported point does not verify: %v", err)
	}
	again, err := e.k.ImportKept(e.ctx, r, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if again.Aside == nil || again.Aside.Reason != keeper.ReasonReplaced {
		t.Fatalf("a second import at the same form and fingerprint set aside %+v", again.Aside)
	}

	e.change()
	if _, err := e.k.RestoreKept(e.ctx, req(2, "imported")); err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("the kept data restored from the imported point differs:\n%s", d)
	}
}

func streamNamesOf(r *transfer.ExportReport) []string {
	var out []string
	for _, s := range r.Streams {
		out = append(out, s.Name)
	}
	return out
}

// TestImportRefused: a stream the kept data's plan does not name, two
// directories of one stream, and no directory are refused as bad
// requests before anything is written; an export of a point that is not
// there is not found, and one into a directory that is not empty a conflict.
func TestImportRefused(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "orig")
	to := filepath.Join(t.TempDir(), "out")
	st := fileStore(t, e.dir)
	if _, err := transfer.ExportKept(e.ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "orig", To: to}); err != nil {
		t.Fatal(err)
	}
	kv, stream := filepath.Join(to, e.names.KVStream), filepath.Join(to, e.names.Stream)
	plan := req(0, "")
	plan.Fingerprint, plan.Streams = "", []string{e.names.Stream}
	if _, err := e.k.SetPlan(e.ctx, plan); err != nil {
		t.Fatal(err)
	}
	listed := dirEntries(t, e.dir)
	pre := "import-kept refused: restore point billing/ledger f2-x was not imported: "
	for _, c := range []struct {
		dirs []string
		want string
	}{
		{[]string{stream, kv}, pre + kv + ": it is a backup of stream KV_billing_ledger, which is not a stream of kept data billing/ledger (made of billing_ledger by its plan), so nothing was written"},
		{[]string{stream, stream}, pre + stream + ": it is a second backup of stream billing_ledger, so nothing was written"},
		{nil, pre + "no nats backup directory was given, so nothing was written"},
	} {
		_, err := e.k.ImportKept(e.ctx, req(2, "x"), c.dirs)
		if !errors.Is(err, keeper.ErrBadRequest) || err.Error() != c.want {
			t.Errorf("import of %v:\n got %v\nwant %s", c.dirs, err, c.want)
		}
	}
	if got := dirEntries(t, e.dir); got != listed {
		t.Errorf("a refused import changed the store:\n%s\nwas\n%s", got, listed)
	}

	_, err := transfer.ExportKept(e.ctx, st, transfer.Export{Module: module, Local: local, Form: 9, Fingerprint: "none", To: t.TempDir() + "/x"})
	if !errors.Is(err, keeper.ErrNotFound) || !strings.HasPrefix(err.Error(), "there is no restore point billing/ledger f9-none in file://") {
		t.Errorf("export of a point that is not there: %v", err)
	}
	_, err = transfer.ExportKept(e.ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "orig", To: to})
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "the export's target directory exists and is not empty") {
		t.Errorf("export into the earlier export: %v", err)
	}
	if ents, _ := os.ReadDir(to); len(ents) != 3 {
		t.Errorf("the refused export changed its target: %v", ents)
	}
}
