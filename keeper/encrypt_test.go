package keeper_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// marker is a payload put on the kept data's stream, to be looked for in
// every stored byte.
const marker = "PLAINTEXT-MARKER-7c1e9b04-only-in-the-clear"

func newIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// withCrypt makes the env's keeper encrypt to to (nil: plain) and decrypt
// with ids (nil: no identity).
func withCrypt(t *testing.T, to []string, ids []age.Identity) envOption {
	return func(c *keeper.Config) { c.Seal, c.Unseal = sealer(t, to), opener(ids) }
}

func sealer(t *testing.T, to []string) *agecrypt.Sealer {
	t.Helper()
	if to == nil {
		return nil
	}
	s, err := agecrypt.NewSealer(to)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func opener(ids []age.Identity) *agecrypt.Opener {
	if ids == nil {
		return nil
	}
	return agecrypt.NewOpener(ids)
}

// keeperWith opens another keeper on e's bus and store, as one started with
// other flags would.
func (e *env) keeperWith(to []string, ids []age.Identity) *keeper.Keeper {
	e.t.Helper()
	k, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.Seal, c.Unseal = sealer(e.t, to), opener(ids) })
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

// putMarker publishes marker to the kept data's plain stream.
func (e *env) putMarker() {
	e.t.Helper()
	for range 20 {
		if _, err := e.js.Publish(e.ctx, module+"."+local+".orders.marker", []byte(marker)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// storedWith lists the stored files under dir/sub that hold needle.
func storedWith(t *testing.T, dir, sub, needle string) (holding, all []string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		all = append(all, p)
		if bytes.Contains(b, []byte(needle)) {
			holding = append(holding, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return holding, all
}

func TestEncryptedPointHoldsNoPlaintextAndRestoresWithTheIdentity(t *testing.T) {
	id := newIdentity(t)
	e := newEnv(t, withCrypt(t, []string{id.Recipient().String()}, []age.Identity{id}))
	e.putMarker()

	// The control: a plain point holds the marker, so the grep can fail.
	plain := e.keeperWith(nil, nil)
	if _, err := plain.SnapshotKept(e.ctx, req(1, "plain")); err != nil {
		t.Fatal(err)
	}
	if got, _ := storedWith(t, e.dir, "points/billing/ledger/f1-plain", marker); len(got) == 0 {
		t.Fatal("the plain point does not hold the marker: the test cannot tell")
	}

	before := e.kept()
	snap := e.snapshot(2, "sealed")
	if snap.Point.Encrypted == nil || snap.Point.Archive != "bus.tar.age" ||
		len(snap.Point.Encrypted.Recipients) != 1 || snap.Point.Encrypted.Recipients[0] != id.Recipient().String() ||
		snap.Point.Encrypted.PlainSize <= 0 {
		t.Fatalf("point.json says %+v %+v", snap.Point.Sealing, snap.Point.Encrypted)
	}
	holding, all := storedWith(t, e.dir, "points/billing/ledger/f2-sealed", marker)
	if len(holding) > 0 || len(all) != 4 { // bus.tar.age, point.json, the key indexes of KV_ and OBJ_billing_ledger
		t.Fatalf("stored objects %v; holding the plaintext marker: %v", all, holding)
	}
	if _, err := os.Stat(filepath.Join(snap.Dir, "bus.tar")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a plain bus.tar beside the encrypted one: %v", err)
	}
	// The stored object is an age file that age's own reader decrypts to a
	// tar holding the marker.
	ct, err := os.ReadFile(filepath.Join(snap.Dir, "bus.tar.age"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(snap.Dir, "bus.tar.age")); fi.Size() != snap.Point.ArchiveSize {
		t.Fatalf("archive_size %d is not the stored ciphertext's %d", snap.Point.ArchiveSize, fi.Size())
	}
	r, err := age.Decrypt(bytes.NewReader(ct), id)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := io.ReadAll(r)
	if err != nil || int64(len(pt)) != snap.Point.Encrypted.PlainSize || !bytes.Contains(pt, []byte("manifest.json")) {
		t.Fatalf("decrypted %d bytes (%v), plain_size %d", len(pt), err, snap.Point.Encrypted.PlainSize)
	}

	if _, err := e.k.VerifyKept(e.ctx, req(2, "sealed")); err != nil {
		t.Fatalf("verify-kept with the identity: %v", err)
	}

	e.change()
	changed := e.kept()
	rep, err := e.k.RestoreKept(e.ctx, req(2, "sealed"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Fatalf("kept data after restore differs from the point:\n%s", d)
	}
	// The aside written on the way is encrypted too.
	if rep.Aside == nil || rep.Aside.Encrypted == nil {
		t.Fatalf("the aside %+v is not encrypted", rep.Aside)
	}
	if got, _ := storedWith(t, e.dir, rep.Aside.Dir, "manifest.json"); len(got) > 0 {
		t.Fatalf("the aside holds plaintext: %v", got)
	}
	// The encrypted aside puts back what was live.
	back := req(0, "")
	back.From = "aside/" + rep.Aside.ID
	if _, err := e.k.RestoreKept(e.ctx, back); err != nil {
		t.Fatalf("putting the encrypted aside back: %v", err)
	}
	if d := sample.Diff(changed, e.kept()); d != "" {
		t.Fatalf("kept data after putting the aside back differs from what was live:\n%s", d)
	}

	// A keeper that encrypts restores the old plain point as well.
	if _, err := e.k.RestoreKept(e.ctx, req(1, "plain")); err != nil {
		t.Fatalf("restore of the plain point by an encrypting keeper: %v", err)
	}
}

func TestEncryptedPointIsRefusedWithoutTheIdentity(t *testing.T) {
	id := newIdentity(t)
	to := []string{id.Recipient().String()}
	e := newEnv(t, withCrypt(t, to, []age.Identity{id}))
	e.snapshot(2, "sealed")
	e.change()
	changed := e.kept()
	asides := func() int {
		ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
		return len(ents)
	}
	where := filepath.Join(e.dir, "points/billing/ledger/f2-sealed/bus.tar.age")
	for _, c := range []struct {
		name string
		k    *keeper.Keeper
		want string
	}{
		{"no identity, not encrypting", e.keeperWith(nil, nil),
			"restore-kept of billing/ledger: restore point billing/ledger f2-sealed cannot be read here: " + where +
				" is encrypted to " + to[0] + " and this keeper has no --identity to decrypt it, so nothing was set aside or removed"},
		{"another identity", e.keeperWith(nil, []age.Identity{newIdentity(t)}),
			"restore-kept of billing/ledger: restore point billing/ledger f2-sealed cannot be read here: " + where +
				" is encrypted to " + to[0] + " and this keeper's --identity is none of them, so nothing was set aside or removed"},
		{"encrypting, no identity", e.keeperWith(to, nil),
			"restore-kept of billing/ledger: this keeper encrypts what it writes (--encrypt-to) but has no --identity to read a set-aside copy back and verify it before the live data is removed, so nothing was set aside or removed"},
	} {
		_, err := c.k.RestoreKept(e.ctx, req(2, "sealed"))
		if !errors.Is(err, keeper.ErrLocked) || keeper.KindOf(err) != keeper.ErrLocked {
			t.Fatalf("%s: %v, want ErrLocked", c.name, err)
		}
		if err.Error() != c.want {
			t.Fatalf("%s:\n got %s\nwant %s", c.name, err, c.want)
		}
		if d := sample.Diff(changed, e.kept()); d != "" {
			t.Fatalf("%s: the live data changed:\n%s", c.name, d)
		}
		if n := asides(); n != 0 {
			t.Fatalf("%s: %d aside(s) made", c.name, n)
		}
	}

	// verify-kept without the identity checks the ciphertext and says the
	// contents were not checked.
	_, err := e.keeperWith(nil, nil).VerifyKept(e.ctx, req(2, "sealed"))
	if !errors.Is(err, keeper.ErrLocked) || !strings.Contains(err.Error(), "matches the checksum point.json names, but its contents were NOT checked") {
		t.Fatalf("verify-kept without identity: %v", err)
	}
}

func TestFlippedCiphertextByteFailsVerification(t *testing.T) {
	id := newIdentity(t)
	e := newEnv(t, withCrypt(t, []string{id.Recipient().String()}, []age.Identity{id}))
	snap := e.snapshot(2, "sealed")
	path := filepath.Join(snap.Dir, "bus.tar.age")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(2, "sealed")); !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("verify-kept with the identity: %v, want ErrDamaged", err)
	}
	if _, err := e.keeperWith(nil, nil).VerifyKept(e.ctx, req(2, "sealed")); !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("verify-kept without the identity: %v, want ErrDamaged (the ciphertext's checksum)", err)
	}
	before := e.kept()
	if _, err := e.k.RestoreKept(e.ctx, req(2, "sealed")); err == nil {
		t.Fatal("a damaged encrypted point restored")
	}
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Fatalf("the live data changed:\n%s", d)
	}
}

// A point taken again at the same form and fingerprint, now encrypted,
// replaces the plain one: the plain archive is set aside whole and does not
// stay beside the encrypted point.
func TestRetakenEncryptedLeavesNoPlainArchive(t *testing.T) {
	id := newIdentity(t)
	e := newEnv(t, withCrypt(t, []string{id.Recipient().String()}, []age.Identity{id}))
	plain := e.keeperWith(nil, nil)
	if _, err := plain.SnapshotKept(e.ctx, req(1, "again")); err != nil {
		t.Fatal(err)
	}
	rep := e.snapshot(1, "again")
	if rep.Aside == nil || rep.Aside.Encrypted != nil {
		t.Fatalf("the plain point was not set aside as it was: %+v", rep.Aside)
	}
	ents, err := os.ReadDir(rep.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "bus.tar.age,keys-KV_billing_ledger.idx.age,keys-OBJ_billing_ledger.idx.age,point.json" {
		t.Fatalf("the point's directory holds %v", names)
	}
	if _, err := os.Stat(filepath.Join(e.dir, rep.Aside.Dir, "bus.tar")); err != nil {
		t.Fatalf("the replaced plain archive is not in its aside: %v", err)
	}
	// The aside puts the plain data back, by a keeper without the identity too.
	back := req(0, "")
	back.From = "aside/" + rep.Aside.ID
	if _, err := plain.RestoreKept(e.ctx, back); err != nil {
		t.Fatalf("putting the plain aside back: %v", err)
	}
}

// An encrypted restore interrupted half-way is taken up only by a keeper
// with the identity: one without refuses (ErrLocked) and changes nothing;
// one with it completes the restore.
func TestInterruptedEncryptedRestoreNeedsTheIdentity(t *testing.T) {
	id := newIdentity(t)
	e, stop := crashEnv(t, "removed:"+sample.NamesOf(module, local).KVStream,
		withCrypt(t, []string{id.Recipient().String()}, []age.Identity{id}))
	point := e.kept()
	e.snapshot(1, "fp")
	e.change()
	stop()
	half := e.kept()

	rec, err := e.keeperWith(nil, nil).Recover(e.ctx)
	if w := rec.Waiting(); err != nil || len(w) != 1 || !errors.Is(w[0].Err, keeper.ErrLocked) || !strings.Contains(w[0].Err.Error(), "was not taken up") {
		t.Fatalf("recovery without the identity: %v %+v, want its kept data waiting, ErrLocked", err, rec)
	}
	if d := sample.Diff(half, e.kept()); d != "" {
		t.Fatalf("recovery without the identity changed the bus:\n%s", d)
	}
	rec, err = e.keeperWith(nil, []age.Identity{id}).Recover(e.ctx)
	if said := rec.Said(); err != nil || len(said) != 1 || !strings.Contains(said[0], "was completed") {
		t.Fatalf("recovery with the identity: %v %+v", err, rec)
	}
	if d := sample.Diff(point, e.kept()); d != "" {
		t.Fatalf("after recovery the kept data is not the point:\n%s", d)
	}
}

// TestEncryptedExportAndImport: an encrypted point exports only with the
// identity (refused as locked without it, nothing written), as plain nats
// backup directories that say nothing of the key; imported by a keeper
// that encrypts, the new point is encrypted too and restores whole.
func TestEncryptedExportAndImport(t *testing.T) {
	id := newIdentity(t)
	e := newEnv(t, withCrypt(t, []string{id.Recipient().String()}, []age.Identity{id}))
	e.putMarker()
	before := e.kept()
	e.snapshot(1, "sealed")
	st := fileStore(t, e.dir)
	locked := filepath.Join(t.TempDir(), "locked")
	_, err := transfer.ExportKept(e.ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "sealed", To: locked})
	if keeper.KindOf(err) != keeper.ErrLocked || !strings.Contains(err.Error(), "nothing was exported") {
		t.Fatalf("an export of an encrypted point without the identity: %v, want locked", err)
	}
	if _, serr := os.Stat(locked); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("a refused export left %s behind (%v)", locked, serr)
	}
	to := filepath.Join(t.TempDir(), "out")
	exp, err := transfer.ExportKept(e.ctx, st, transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "sealed", To: to,
		Unseal: agecrypt.NewOpener([]age.Identity{id})})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, exp.Said, "decrypted with --identity")
	if holding, _ := storedWith(t, to, "", marker); len(holding) == 0 {
		t.Errorf("the exported directories hold no plain data (the marker is in none of them)")
	}
	var dirs []string
	for _, s := range exp.Streams {
		dirs = append(dirs, s.Dir)
	}
	rep, err := e.k.ImportKept(e.ctx, req(2, "imported"), dirs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Point == nil || rep.Point.Encrypted == nil {
		t.Fatalf("a point imported by an encrypting keeper: %+v, want it encrypted", rep.Point)
	}
	if holding, _ := storedWith(t, e.dir, "points", marker); len(holding) != 0 {
		t.Errorf("stored objects hold the plain marker: %v", holding)
	}
	e.change()
	if _, err := e.k.RestoreKept(e.ctx, req(2, "imported")); err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("the kept data restored from the imported encrypted point differs:\n%s", d)
	}
}
