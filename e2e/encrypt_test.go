package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// marker is a payload put on the kept data, to be looked for in every
// stored byte.
const marker = "E2E-PLAINTEXT-MARKER-5d41402a"

func putMarker(t *testing.T, js jetstream.JetStream, module, local string) {
	t.Helper()
	for range 10 {
		if _, err := js.Publish(context.Background(), module+"."+local+".orders.marker", []byte(marker)); err != nil {
			t.Fatal(err)
		}
	}
}

// writeIdentity writes a new age identity to dir/name (0600) and returns
// the file and its recipient.
func writeIdentity(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("# a test key\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, id.Recipient().String()
}

// TestEncryptedPointEndToEnd runs serve --encrypt-to: the point holds no
// plaintext, the real age CLI and tar turn it into the streams' files, a
// keeper without the identity or with another one refuses to restore it
// with a sentence and exit 7 (live data untouched), and one with the
// identity restores it whole.
func TestEncryptedPointEndToEnd(t *testing.T) {
	tmp := t.TempDir()
	const module, local = "billing", "ledger"
	idFile, recipient := writeIdentity(t, tmp, "keeper.key")
	otherFile, _ := writeIdentity(t, tmp, "other.key")
	rcptFile := filepath.Join(tmp, "recipients.txt")
	if err := os.WriteFile(rcptFile, []byte("# the ops team\n"+recipient+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	srv, nc, js := sampleOnProc(t, tmp, module, local)
	ctx := context.Background()
	putMarker(t, js, module, local)
	dir := filepath.Join(tmp, "keeper")
	serve := func(args ...string) *keeperProc {
		k := startKeeperArgs(t, srv.url(), dir, tmp, args)
		waitKeepers(t, nc, 1, k)
		return k
	}
	k := serve("--encrypt-to-file", rcptFile, "--identity", idFile)
	dump := func() *sample.Snapshot {
		d, err := sample.Dump(ctx, js, sample.NamesOf(module, local).Streams()...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := dump()
	mustCLI(t, tmp, srv.url(), "snapshot-kept", module, local, "--form", "2", "--before", "sealed")
	pointDir := filepath.Join(dir, "points", module, local, "f2-sealed")

	// No stored object holds the payload in the clear.
	var stored []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, filepath.Join(dir, "nats")) {
			return err
		}
		stored = append(stored, p)
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), marker) {
			t.Errorf("%s holds the plaintext payload", p)
		}
		return err
	})
	if _, err := os.Stat(filepath.Join(pointDir, "bus.tar.age")); err != nil {
		t.Fatalf("no bus.tar.age among %v: %v", stored, err)
	}
	var rec struct {
		Archive   string `json:"archive"`
		Encrypted struct {
			Format     string   `json:"format"`
			Recipients []string `json:"recipients"`
		} `json:"encrypted"`
	}
	if b, err := os.ReadFile(filepath.Join(pointDir, "point.json")); err != nil || json.Unmarshal(b, &rec) != nil ||
		rec.Archive != "bus.tar.age" || rec.Encrypted.Format != "age" || len(rec.Encrypted.Recipients) != 1 || rec.Encrypted.Recipients[0] != recipient {
		t.Fatalf("point.json: %+v (%v)", rec, err)
	}

	// age -d bus.tar.age | tar x, as the README shows, gives each stream's
	// snapshot and backup.json, each as its manifest hashes it.
	out := filepath.Join(tmp, "untarred")
	os.Mkdir(out, 0o700)
	sh := exec.Command("sh", "-c", `"$AGE" -d -i "$KEY" "$ARCHIVE" | tar x -C "$OUT"`)
	sh.Env = append(os.Environ(), "AGE="+tools.Age(t), "KEY="+idFile, "ARCHIVE="+filepath.Join(pointDir, "bus.tar.age"), "OUT="+out)
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("age -d | tar x: %v\n%s", err, b)
	}
	var m struct {
		Streams []struct {
			Name    string `json:"name"`
			Entries []struct {
				Name   string `json:"name"`
				SHA256 string `json:"sha256"`
			} `json:"entries"`
		} `json:"streams"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "manifest.json")); err != nil || json.Unmarshal(b, &m) != nil || len(m.Streams) != 3 {
		t.Fatalf("manifest.json from tar x: %+v (%v)", m, err)
	}
	for _, s := range m.Streams {
		if len(s.Entries) != 2 {
			t.Fatalf("stream %s: entries %+v", s.Name, s.Entries)
		}
		for _, e := range s.Entries {
			b, err := os.ReadFile(filepath.Join(out, e.Name))
			if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != e.SHA256 {
				t.Fatalf("%s from tar x: %v, or not the manifest's SHA-256", e.Name, err)
			}
		}
	}

	// The change, then restores by keepers without the identity: refused,
	// exit 7, the live data untouched, no aside made.
	if err := sample.Change(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	changed := dump()
	where := filepath.Join(pointDir, "bus.tar.age")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "restore-kept of billing/ledger: restore point billing/ledger f2-sealed cannot be read here: " + where +
			" is encrypted to " + recipient + " and this keeper has no --identity to decrypt it, so nothing was set aside or removed"},
		{[]string{"--identity", otherFile}, "restore-kept of billing/ledger: restore point billing/ledger f2-sealed cannot be read here: " + where +
			" is encrypted to " + recipient + " and this keeper's --identity is none of them, so nothing was set aside or removed"},
		{[]string{"--encrypt-to", recipient}, "restore-kept of billing/ledger: this keeper encrypts what it writes (--encrypt-to) but has no --identity " +
			"to read a set-aside copy back and verify it before the live data is removed, so nothing was set aside or removed"},
	} {
		k.p.stop(t, syscall.SIGTERM, time.Minute)
		k = serve(c.args...)
		code, stdout, stderr := runCLI(t, tmp, "restore-kept", module, local, "--form", "2", "--before", "sealed", "--why", "e2e", "--server", srv.url())
		if code != 7 || !strings.Contains(stdout+stderr, c.want) {
			t.Fatalf("serve %v: restore-kept exit %d, want 7 and %q\n%s%s", c.args, code, c.want, stdout, stderr)
		}
		if d := sample.Diff(changed, dump()); d != "" {
			t.Fatalf("serve %v: the live data changed:\n%s", c.args, d)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "aside")); len(ents) != 0 {
			t.Fatalf("serve %v: %d aside(s) made", c.args, len(ents))
		}
	}
	// verify without the identity: ciphertext checked, contents not, exit 7.
	code, stdout, stderr := runCLI(t, tmp, "verify", module, local, "--form", "2", "--before", "sealed", "--server", srv.url())
	if code != 7 || !strings.Contains(stdout+stderr, "matches the checksum point.json names, but its contents were NOT checked") {
		t.Fatalf("verify without the identity: exit %d\n%s%s", code, stdout, stderr)
	}

	k.p.stop(t, syscall.SIGTERM, time.Minute)
	serve("--encrypt-to", recipient, "--identity", idFile) // stopped by the test's cleanup
	mustCLI(t, tmp, srv.url(), "verify", module, local, "--form", "2", "--before", "sealed")
	mustCLI(t, tmp, srv.url(), "restore-kept", module, local, "--form", "2", "--before", "sealed", "--why", "e2e")
	if d := sample.Diff(before, dump()); d != "" {
		t.Fatalf("after restore-kept with the identity the data differs from the point:\n%s", d)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "aside"))
	if len(ents) != 1 {
		t.Fatalf("%d asides after the restore", len(ents))
	}
	if _, err := os.Stat(filepath.Join(dir, "aside", ents[0].Name(), "bus.tar.age")); err != nil {
		t.Fatalf("the aside is not encrypted: %v", err)
	}
}

// TestEncryptedPointInRemoteStores takes an encrypted point into a nats://
// store on a second server (the vault) and into S3 (versitygw): no byte the
// vault's server keeps on disk, and no S3 object, holds the payload in the
// clear, and the point restores whole.
func TestEncryptedPointInRemoteStores(t *testing.T) {
	for _, kind := range []string{"nats", "s3"} {
		t.Run(kind, func(t *testing.T) {
			tmp := t.TempDir()
			const module, local = "vaulted", "ledger"
			idFile, recipient := writeIdentity(t, tmp, "keeper.key")
			srv, nc, js := sampleOnProc(t, tmp, module, local)
			putMarker(t, js, module, local)
			var args, env []string
			var stored func() map[string][]byte
			switch kind {
			case "nats":
				vaultDir := filepath.Join(tmp, "vault")
				vault := startNatsServer(t, tools.NatsServer(t), vaultDir)
				args = []string{"--store", vault.url() + "/keeper-points"}
				stored = func() map[string][]byte { return filesUnder(t, vaultDir) }
			case "s3":
				s := startS3(t, "keeper-points")
				args, env = s.args("s3://keeper-points/e2e"), s.env()
				stored = func() map[string][]byte { return s.objects(t, "keeper-points", "e2e/") }
			}
			k := startKeeperArgs(t, srv.url(), filepath.Join(tmp, "keeper"), tmp,
				append(args, "--encrypt-to", recipient, "--identity", idFile), env...)
			waitKeepers(t, nc, 1, k)
			req := map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "one", "caller": "e2e"}
			snap := mustCall(t, nc, "snapshot-kept", req)
			point := dumpState(t, js, module, local)
			rec, _ := snap.Body["point"].(map[string]any)
			size, _ := rec["archive_size"].(float64)
			if rec["archive"] != "bus.tar.age" || size <= 0 {
				t.Fatalf("the point is not encrypted: %v", rec)
			}
			var total int
			for name, b := range stored() {
				if strings.Contains(string(b), marker) {
					t.Errorf("%s holds the plaintext payload", name)
				}
				total += len(b)
			}
			if total < int(size) {
				t.Fatalf("the store holds %d bytes, fewer than the archive's %d: the grep read the wrong place", total, int(size))
			}
			if err := sample.Change(context.Background(), js, module, local); err != nil {
				t.Fatal(err)
			}
			mustCall(t, nc, "restore-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "one",
				"why": "e2e", "caller": "e2e"})
			if d := point.diff(dumpState(t, js, module, local)); d != "" {
				t.Fatalf("after restore-kept the kept data differs from the point:\n%s", d)
			}
		})
	}
}

// filesUnder reads every file under dir.
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
