package busarchive

// A stand-in for the archive helper's API (BRIEF.md), so that the delta
// restore compiles until it lands on main; deleted at that merge.

import (
	"errors"
	"io"
)

type ArchivedMessage struct {
	Seq          uint64
	Time         int64
	Subject      string
	Header, Data []byte
}

type ArchiveHead struct {
	FirstSeq, LastSeq, Msgs, Bytes uint64
	FirstTime, LastTime            int64
	Consumers                      int
	Raw                            []byte
}

var errStub = errors.New("busarchive: stream archives are not written yet")

func ReadStreamArchive(r io.Reader, consumer func(name string, entry []byte) error, msg func(ArchivedMessage) error) (*ArchiveHead, error) {
	return nil, errStub
}

type StreamArchiveWriter struct{}

func NewStreamArchiveWriter(w io.Writer, head ArchiveHead) (*StreamArchiveWriter, error) {
	return nil, errStub
}
func (w *StreamArchiveWriter) Consumer(name string, entry []byte) error { return errStub }
func (w *StreamArchiveWriter) Message(m ArchivedMessage) error          { return errStub }
func (w *StreamArchiveWriter) Close() error                             { return errStub }

func BumpLastSeq(r io.Reader, last uint64) io.Reader { return r }
