// Package store is where restore points and set-aside copies live: a small,
// documented object interface that the keeper's domain core writes and reads
// through, with one leaf package per backend (store/filestore for a
// directory, store/natsstore for a JetStream object store, store/s3store for
// S3). Nothing here imports a NATS or S3 client.
//
// The contract every backend keeps (store/storetest proves it against each):
//
//   - Keys are slash-separated paths of checked plain names (CheckKey). The
//     keeper makes them only from names it checked itself.
//   - An object is visible whole or not at all. A Writer's bytes are
//     invisible until Commit returns nil; Abort or a crash leaves no object
//     under the key (leftovers may remain where List does not show them, and
//     Sweep removes them). A failed Commit leaves none either, except where
//     the commit's last step went out and its answer was lost (a remote
//     store's head, a file store's rename before the directory's sync): the
//     object may then appear whole. Committing over an existing key replaces
//     it whole, atomically: a reader sees the old object or the new one,
//     never a mix; an Object opened before may then fail to read on remote
//     stores, never read a mix.
//   - Writes are streaming with bounded memory, whatever the object's size: a
//     Writer holds at most a few parts (PartSize) of it. Bytes are written in
//     order; WriteAt may rewrite only bytes inside a range still held by
//     Hold, which is how an archive patches a tar header it wrote before the
//     entry's size was known. No backend keeps a part in memory for a hold:
//     the ones that upload in parts keep the part where they can read it
//     back (store.PartReader: a part object of the object store, an object
//     of its own under S3's .keeper-held/) and upload it, read back and
//     patched, when the hold ends; the file store rewrites its file in place
//     (three 1 MiB buffers in all) and hashes a held part again, read back
//     from the file. A sink that is not a PartReader has its held part kept
//     by NewPartWriter and uploaded last.
//   - Reads are ranged on every backend: Object.ReadAt and Object.Reader read
//     any range without reading the whole object (a backend without native
//     ranges stores objects in parts and reads only the parts it needs).
//   - Every object's checksum (Info.Sum) is the SHA-256 of the SHA-256s of
//     its PartSize parts in order (see Checksum), computed as it is written,
//     so a part rewritten through Hold is counted as it was committed. Commit
//     always returns it; Stat, Open and List report it only where the backend
//     keeps it (the file store does not), else "". Open checks nothing by
//     itself; the keeper compares the Sum a store reports with the one its
//     commit mark names, and verification hashes every entry.
//   - List returns committed objects whose key begins with a prefix, sorted by
//     key, and is consistent with Commit and Delete that returned before it
//     began (each backend's Description says how).
//   - Delete of a missing key is not an error. ErrNotFound is wrapped by every
//     error about a key that holds no object.
//
// A Store is safe for concurrent use. Close releases it; it is safe twice.
//
// It owns the store port and its helpers (keys, part writers, errors); it
// imports only the standard library.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// PartSize is the size of the parts that every backend hashes (and, where it
// uploads in parts, uploads): 8 MiB. All parts but the last are exactly this
// size. S3 needs at least 5 MiB per part; JetStream messages stay well under
// the server's max payload because the object store chunks each part.
const PartSize = 8 << 20

// MaxKeyLen bounds a key: every backend (file paths, object-store names, S3
// keys) takes 1,024 bytes.
const MaxKeyLen = 1024

// Errors every backend wraps.
var (
	// ErrNotFound: the key holds no committed object.
	ErrNotFound = errors.New("no such object in the store")
	// ErrBadKey: the key is not made of checked plain names.
	ErrBadKey = errors.New("not a valid store key")
	// ErrUnavailable: the store could not be reached or refused the
	// credentials; nothing was read or written.
	ErrUnavailable = errors.New("the store is not reachable")
	// ErrFull: the store refused a write for want of room (a full disk, an
	// object-store bucket's max_bytes, an account's JetStream storage limit,
	// an S3 quota or EntityTooLarge). The object was not committed and what
	// the write had stored was given up, as after any failed write.
	ErrFull = errors.New("the store has no room for it")
	// ErrRefused: the store answered a write (a part's upload, a commit)
	// with a refusal of the request itself (an S3 4xx that is none of
	// ErrFull's, ErrNotFound's or ErrUnavailable's), which trying again
	// does not change. Nothing was committed.
	ErrRefused = errors.New("the store refused the write")
)

// Info describes one committed object.
type Info struct {
	Key      string    `json:"key"`      // the object's key
	Size     int64     `json:"size"`     // its bytes
	Sum      string    `json:"sum"`      // Checksum of the bytes, hex; "" where the backend could not tell (List may leave it empty)
	Modified time.Time `json:"modified"` // when it was committed, as the backend tells it
}

// Store is one place where objects live.
type Store interface {
	// Create begins a new object at key. Nothing is visible until the
	// Writer's Commit returns nil.
	Create(ctx context.Context, key string) (Writer, error)
	// Open opens the committed object at key for reading. Its error wraps
	// ErrNotFound when there is none.
	Open(ctx context.Context, key string) (Object, error)
	// Stat describes the committed object at key, or wraps ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List describes every committed object whose key begins with prefix,
	// sorted by key. A prefix of "" lists everything.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the object at key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Sweep removes leftovers of writes that never committed (uploads,
	// parts, temporary files) that are older than age. It never removes a
	// committed object.
	Sweep(ctx context.Context, age time.Duration) error
	// Describe says what the store is and what it guarantees.
	Describe() Description
	// Close releases the store's connections; it is safe twice.
	Close() error
}

// Writer writes one new object. It is used from one goroutine.
type Writer interface {
	// Write appends to the object.
	Write(p []byte) (int, error)
	// WriteAt rewrites bytes already written, at off; every byte must lie
	// in a range Hold keeps. Anything else is an error and the object can no
	// longer be committed.
	WriteAt(p []byte, off int64) (int, error)
	// Hold keeps the n bytes at off (written, or about to be) changeable by
	// WriteAt until Release. At most one range is held at a time.
	Hold(off, n int64)
	// Release ends the hold: the held bytes are final.
	Release()
	// Commit makes the object visible whole under its key, durably, and
	// returns its Info (Sum set). Nothing may be written after it.
	Commit(ctx context.Context) (Info, error)
	// Abort gives the object up: nothing becomes visible. It is safe after
	// Commit (it then does nothing) and safe twice.
	Abort()
}

// Object reads one committed object.
type Object interface {
	io.ReaderAt
	// Size is the object's size.
	Size() int64
	// Info describes the object as it was opened.
	Info() Info
	// Reader reads the n bytes at off front to back, streaming; the range
	// must lie inside the object. Close it.
	Reader(ctx context.Context, off, n int64) (io.ReadCloser, error)
	// Close releases the object.
	Close() error
}

// Description is what a store is and what it guarantees.
type Description struct {
	// URL names the store without secrets (file:///var/lib/nats-keeper,
	// nats://vault:4222/keeper-points, s3://bucket/prefix).
	URL string `json:"url"`
	// Kind is "file", "nats" or "s3".
	Kind string `json:"kind"`
	// Publish says how Commit makes an object visible whole.
	Publish string `json:"publish"`
	// Ranges says how ranged reads are served.
	Ranges string `json:"ranges"`
	// Listing says how List relates to Commit and Delete.
	Listing string `json:"listing"`
}

// FreeSpacer is implemented by stores that can tell how many bytes they may
// still take: the file backend (statfs) and the object store (its bucket's
// max_bytes and its account's JetStream storage limits). S3 does not.
type FreeSpacer interface {
	// FreeSpace is the bytes a write may still use, or an error.
	FreeSpace(ctx context.Context) (int64, error)
}

// DiskSharer is implemented by stores on a local file system (the file
// backend): whether a local path lies on the store's own file system, so
// that bytes written there take the store's free space.
type DiskSharer interface {
	SharesDisk(path string) (bool, error)
}

// Copier is implemented by stores that copy an object within themselves
// without passing its bytes through the keeper (a hard link, a server-side
// copy). Copy makes dst a committed object equal to src, atomically.
type Copier interface {
	// Copy makes dst a committed object equal to src and returns its Info.
	Copy(ctx context.Context, src, dst string) (Info, error)
}

// CheckKey refuses a key that is empty, longer than MaxKeyLen, absolute, or
// holds an empty, "." or ".." element, a backslash, a NUL, a control
// character, a space, "*" or ">": keys are made of checked plain names
// joined by "/". (A backend may refuse more, such as the file store an
// element over 255 bytes or beginning with a dot, with ErrBadKey.)
func CheckKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %.200q %s", ErrBadKey, key, why)
	}
	switch {
	case key == "":
		return bad("is empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("is %d bytes, over %d", len(key), MaxKeyLen))
	case strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/"):
		return bad("begins or ends with /")
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." {
			return bad("has an empty, . or .. element")
		}
	}
	for _, r := range key {
		if r < 0x21 || r == 0x7f || r == '\\' || r == '*' || r == '>' {
			return bad("holds a space, control character, backslash, * or >")
		}
	}
	return nil
}

// CopyObject copies src of from into dst of to, streaming through the
// keeper with bounded memory, and returns the new object's Info. The
// Checksum of what was read is compared with src's own; a mismatch aborts.
func CopyObject(ctx context.Context, from Store, src string, to Store, dst string) (Info, error) {
	o, err := from.Open(ctx, src)
	if err != nil {
		return Info{}, err
	}
	defer o.Close()
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		return Info{}, err
	}
	defer r.Close()
	_, err = to.Stat(ctx, dst)
	existed := err == nil
	w, err := to.Create(ctx, dst)
	if err != nil {
		return Info{}, err
	}
	defer w.Abort()
	if _, err := io.Copy(w, r); err != nil {
		return Info{}, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	info, err := w.Commit(ctx)
	if err != nil {
		return Info{}, err
	}
	if want := o.Info().Sum; want != "" && info.Sum != want {
		if existed {
			return Info{}, fmt.Errorf("copying %s to %s: the copy's checksum %s differs from the original's %s; it replaced what %s held, so do not use it", src, dst, info.Sum, want, dst)
		}
		if err := to.Delete(ctx, dst); err != nil {
			return Info{}, fmt.Errorf("copying %s to %s: the copy's checksum %s differs from the original's %s, and removing the copy failed too (%v)", src, dst, info.Sum, want, err)
		}
		return Info{}, fmt.Errorf("copying %s to %s: the copy's checksum %s differs from the original's %s, so the copy was removed", src, dst, info.Sum, want)
	}
	return info, nil
}
