package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

// serve's encryption flags: recipients from the flag and the file, and an
// identity file that must be the keeper's own secret.
func TestSealingFlags(t *testing.T) {
	dir := t.TempDir()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	key := write("key", "# made by a test\n"+id.String()+"\n", 0o600)
	rcpts := write("rcpts", "# team\n"+other.Recipient().String()+"\n\n", 0o644)

	seal, unseal, err := sealFlags{EncryptTo: []string{id.Recipient().String()}, EncryptToFile: rcpts, Identity: key}.open()
	if err != nil {
		t.Fatal(err)
	}
	if got := seal.Recipients(); len(got) != 2 || got[0] != id.Recipient().String() || got[1] != other.Recipient().String() {
		t.Fatalf("recipients %v", got)
	}
	if !unseal.Holds() {
		t.Fatal("the identity was not taken")
	}
	if seal, unseal, err := (sealFlags{}).open(); seal != nil || unseal.Holds() || err != nil {
		t.Fatalf("no flags: %v %v %v", seal, unseal, err)
	}

	open := write("open.key", id.String()+"\n", 0o644)
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(key, link); err != nil {
		t.Fatal(err)
	}
	notKey := write("notkey", "AGE-SECRET-KEY-1NOTAKEY\n", 0o600)
	badRcpts := write("badrcpts", other.Recipient().String()+"\nage1nope\n", 0o600)
	for _, c := range []struct {
		to         []string
		file, key  string
		want, leak string
	}{
		{nil, "", open, "is open to group or other (mode 0644); run chmod 600", id.String()},
		{nil, "", link, "too many levels of symbolic links", id.String()},
		{nil, "", notKey, "does not read as age identities", "NOTAKEY"},
		{nil, "", filepath.Join(dir, "missing"), "no such file", ""},
		{nil, badRcpts, "", "--encrypt-to-file: recipients file " + badRcpts + ": line 2: recipient", ""},
		{[]string{"AGE-SECRET-KEY-1PASTEDBYMISTAKE"}, "", "", "--encrypt-to: recipient", "PASTEDBYMISTAKE"},
	} {
		_, _, err := sealFlags{EncryptTo: c.to, EncryptToFile: c.file, Identity: c.key}.open()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q %q: %v, want %q", c.to, c.file, c.key, err, c.want)
		} else if c.leak != "" && strings.Contains(err.Error(), c.leak) {
			t.Errorf("%v %q %q: the error quotes the secret: %v", c.to, c.file, c.key, err)
		}
	}
}
