package busarchive

import (
	"errors"
	"fmt"
)

// Kinds of archive problem. Every problem Verify or Open reports wraps one of
// these, so callers can test with errors.Is.
var (
	ErrIncomplete = errors.New("archive is incomplete")
	ErrChecksum   = errors.New("entry does not match its checksum")
	ErrLayout     = errors.New("entry is outside the archive layout")
	ErrFormat     = errors.New("archive format is not understood")
	ErrTooLarge   = errors.New("size is over the archive's bounds")
)

// EntryError is one problem with one entry of an archive.
type EntryError struct {
	Entry  string // the entry's name in the tar, or "" for the archive as a whole
	Kind   error  // one of the Err* sentinels above
	Detail string // what exactly is wrong
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("%v: %s", e.Kind, e.Detail)
	}
	return fmt.Sprintf("%s: %v: %s", e.Entry, e.Kind, e.Detail)
}

func (e *EntryError) Unwrap() error { return e.Kind }

// Problems lists every *EntryError inside err (as joined by Verify), in order,
// also when err wraps the joined problems, as a restore fed from
// CheckedStreamData does.
func Problems(err error) []*EntryError {
	var out []*EntryError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ee, ok := err.(*EntryError); ok {
			out = append(out, ee)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// ErrNoStream is returned when a stream asked for is not in the archive.
var ErrNoStream = errors.New("archive holds no such stream")
