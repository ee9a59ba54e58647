package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
)

// TestCopyFileToFile copies a keeper directory's points and aside into
// another directory through the whole command line: everything is copied
// byte for byte, a second run skips everything, and a point whose archive was
// damaged in the source fails alone with a sentence (exit 1) and gets no
// record in the target.
func TestCopyFileToFile(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	f := b.flags()
	for _, fp := range []string{"one", "two"} {
		var o outs
		if err := runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 1, Before: fp}); err != nil {
			t.Fatalf("snapshot-kept %s: %v", fp, err)
		}
	}
	var o outs
	if err := runRestore(ctx, restoreOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 1, FormSet: true, Before: "one", Why: "test"}); err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	src, dst := "file://"+b.dir, "file://"+filepath.Join(t.TempDir(), "copy")
	one, two := "points/billing/ledger/f1-one", "points/billing/ledger/f1-two"

	code, out, errText := runArgs(t, "copy", "--from-store", src, "--to-store", dst)
	if code != 0 {
		t.Fatalf("copy: exit %d\n%s%s", code, out, errText)
	}
	mustContain(t, "copy", out, "copied   "+one, "copied   "+two, "copied   aside/billing.ledger.",
		"done: 3 copied, 0 skipped, 0 failed, of 3 point(s) and aside(s) from "+src+" to "+dst)
	target := strings.TrimPrefix(dst, "file://")
	for _, rel := range []string{one, two} {
		for _, name := range []string{"point.json", "bus.tar"} {
			want, err := os.ReadFile(filepath.Join(b.dir, rel, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(target, rel, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("the copy of %s/%s differs from the source (%v)", rel, name, err)
			}
		}
	}

	code, out, errText = runArgs(t, "copy", "--from-store", src, "--to-store", dst, "--json")
	var rep copyJSON
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("copy again --json: exit %d, %v\n%s%s", code, err, out, errText)
	}
	if len(rep.Copied) != 0 || len(rep.Skipped) != 3 || len(rep.Failed) != 0 || rep.From != src || rep.To != dst {
		t.Errorf("copy again copied %v, skipped %v, failed %v (from %s to %s); want all 3 skipped", rep.Copied, rep.Skipped, rep.Failed, rep.From, rep.To)
	}

	// A third point, damaged in the source: one flipped byte inside a
	// stream's data.
	if err := runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 1, Before: "three"}); err != nil {
		t.Fatalf("snapshot-kept three: %v", err)
	}
	three := "points/billing/ledger/f1-three"
	tarPath := filepath.Join(b.dir, three, "bus.tar")
	archive, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	off, size := tartest.DataRange(t, archive, tartest.LargestData(t, archive))
	archive[off+size/2] ^= 0x01
	if err := os.WriteFile(tarPath, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errText = runArgs(t, "copy", "--from-store", src, "--to-store", dst, "billing")
	if code != exitFailed {
		t.Errorf("copy of a damaged point: exit %d, want %d\n%s%s", code, exitFailed, out, errText)
	}
	mustContain(t, "copy of a damaged point", out, "FAILED   "+three+": ", "skipped  "+one, "skipped  "+two,
		"NOT ALL COPIED: 0 copied, 3 skipped, 1 failed, of 4 point(s)")
	mustContain(t, "copy of a damaged point, stderr", errText, "nats-keeper: 1 of 4 point(s) and aside(s) were not copied: "+three+": ")
	if _, err := os.Stat(filepath.Join(target, three, "point.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the damaged point has a record in the target: %v", err)
	}
	t.Logf("the damaged point: %s", strings.TrimSpace(errText))
}

// TestCopyRefusals: both stores are needed, and a store that cannot be
// opened is exit 5, with a sentence naming it.
func TestCopyRefusals(t *testing.T) {
	dir := "file://" + t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"copy", "--to-store", dir}, exitUsage, "copy needs both --from-store and --to-store"},
		{[]string{"copy", "--from-store", dir, "--to-store", ""}, exitUsage, "copy needs both --from-store and --to-store"},
		{[]string{"copy", "--from-store", dir, "--to-store", dir}, exitUsage, "are both " + dir + ", so nothing was copied"},
		{[]string{"copy", "--from-store", "ftp://x", "--to-store", dir}, exitNoService, "--from-store: the store ftp://x could not be opened"},
		{[]string{"copy", "--from-store", dir, "--to-store", "file://relative/x"}, exitNoService, "--to-store: the store file://relative/x could not be opened"},
	} {
		code, out, errText := runArgs(t, c.args...)
		if code != c.code || !strings.Contains(errText, c.says) {
			t.Errorf("%q: exit %d, want %d with %q\n%s%s", c.args, code, c.code, c.says, out, errText)
		}
	}
}
