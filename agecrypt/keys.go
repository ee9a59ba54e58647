package agecrypt

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"filippo.io/age"
)

// Bounds on what the operator hands in.
const (
	// MaxRecipients is the most recipients an archive is encrypted to.
	MaxRecipients = 64
	// MaxKeyFile is the largest recipients or identity file read.
	MaxKeyFile = 64 << 10
	maxLine    = 1024
)

// ParseRecipient parses one age X25519 recipient (age1…). Its error does
// not repeat more than the recipient's first characters.
func ParseRecipient(s string) (*age.X25519Recipient, error) {
	if len(s) > maxLine || !strings.HasPrefix(s, "age1") {
		return nil, fmt.Errorf("recipient %.4q… is not an age X25519 recipient (age1… of 62 characters)", s)
	}
	r, err := age.ParseX25519Recipient(s)
	if err != nil { // age's own error quotes the whole line, which may be a pasted secret key
		return nil, fmt.Errorf("recipient %.12q… is not an age X25519 recipient (age1… of 62 characters)", s)
	}
	return r, nil
}

// ParseRecipients reads a recipients file: one age X25519 recipient a line;
// blank lines and lines beginning with # (after spaces) are skipped, and
// spaces around a recipient are trimmed. It is refused whole, naming the
// line, when a line is not a recipient, when it is over MaxKeyFile bytes or
// names more than MaxRecipients, or when it names none. A recipient named
// twice counts once.
func ParseRecipients(r io.Reader) ([]string, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the recipients: %w", err)
	}
	if len(data) > MaxKeyFile {
		return nil, fmt.Errorf("the recipients file is over %d bytes", MaxKeyFile)
	}
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxKeyFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rc, err := ParseRecipient(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if s := rc.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
		if len(out) > MaxRecipients {
			return nil, fmt.Errorf("line %d: more than %d recipients", n, MaxRecipients)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the recipients: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the recipients file names no recipient")
	}
	return out, nil
}

// ReadRecipientsFile reads ParseRecipients from a file (symlinks are not
// followed).
func ReadRecipientsFile(path string) ([]string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("recipients file %s: %w", path, err)
	}
	defer f.Close()
	out, err := ParseRecipients(f)
	if err != nil {
		return nil, fmt.Errorf("recipients file %s: %w", path, err)
	}
	return out, nil
}

// ReadIdentityFile reads an age identity file (AGE-SECRET-KEY-1… lines, as
// age-keygen writes them). Like every secret of the keeper it must be a
// regular file of the keeper's own, not a symlink, closed to group and
// other (0600 or stricter), and at most MaxKeyFile bytes. Its errors never
// quote the file's contents.
func ReadIdentityFile(path string) ([]age.Identity, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("identity file %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("identity file %s is open to group or other (mode %04o); run chmod 600 %s", path, fi.Mode().Perm(), path)
	case fi.Size() > MaxKeyFile:
		return nil, fmt.Errorf("identity file %s is over %d bytes", path, MaxKeyFile)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("identity file %s belongs to uid %d, not to the keeper's user (uid %d)", path, st.Uid, os.Geteuid())
	}
	ids, err := age.ParseIdentities(io.LimitReader(f, MaxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("identity file %s does not read as age identities: %v", path, err)
	}
	return ids, nil
}
