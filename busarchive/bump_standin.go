package busarchive

// STAND-IN (branch around): BumpLastSeq as the brief's signature has it,
// until the archive helper's lands on main; this file goes then.

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// BumpLastSeq is r (a stream.arc.s2) with its head's last_seq raised to
// last (unchanged when it is already at or above it).
func BumpLastSeq(r io.Reader, last uint64) io.Reader {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(bumpStandIn(r, pw, last)) }()
	return pr
}

func bumpStandIn(r io.Reader, w io.Writer, last uint64) error {
	ar := archive.NewReader(s2.NewReader(r))
	sw := s2.NewWriter(w)
	aw := archive.NewWriter(sw)
	hdr, err := ar.Next()
	if err != nil {
		return err
	}
	if hdr.Name != "state.json" {
		return fmt.Errorf("the archive does not begin with state.json")
	}
	head, err := io.ReadAll(io.LimitReader(ar, MaxMetaSize))
	if err != nil {
		return err
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(head, &st); err != nil {
		return err
	}
	var ls uint64
	_ = json.Unmarshal(st["last_seq"], &ls)
	if ls < last {
		st["last_seq"], _ = json.Marshal(last)
		if head, err = json.Marshal(st); err != nil {
			return err
		}
	}
	hdr.PayloadSize, hdr.HeaderSize = int64(len(head)), 0
	if err := aw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := aw.Write(head); err != nil {
		return err
	}
	for {
		hdr, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := aw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(aw, ar); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return sw.Close()
}

// ArchivedMessage is one message of a stream archive (stream.arc.s2).
type ArchivedMessage struct {
	Seq          uint64
	Time         int64
	Subject      string
	Header, Data []byte
}

// ArchiveHead is the state.json an archive begins with, parsed.
type ArchiveHead struct {
	FirstSeq, LastSeq, Msgs, Bytes uint64
	FirstTime, LastTime            int64
	Consumers                      int
	Raw                            []byte
}

// ReadStreamArchive reads a stream.arc.s2 front to back (stand-in).
func ReadStreamArchive(r io.Reader, consumer func(name string, entry []byte) error, msg func(ArchivedMessage) error) (*ArchiveHead, error) {
	ar := archive.NewReader(s2.NewReader(r))
	hdr, err := ar.Next()
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(ar, MaxMetaSize))
	if err != nil || hdr.Name != "state.json" {
		return nil, fmt.Errorf("no state.json: %v", err)
	}
	var st struct {
		FirstSeq  uint64 `json:"first_seq"`
		LastSeq   uint64 `json:"last_seq"`
		Msgs      uint64 `json:"messages"`
		Bytes     uint64 `json:"bytes"`
		Consumers int    `json:"consumer_count"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	h := &ArchiveHead{FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Msgs: st.Msgs, Bytes: st.Bytes, Consumers: st.Consumers, Raw: raw}
	for {
		hdr, err := ar.Next()
		if err != nil {
			return h, err
		}
		if hdr.Sequence == 0 && hdr.Name == "" && hdr.Timestamp == 0 && hdr.HeaderSize == 0 && hdr.PayloadSize == 0 {
			return h, nil
		}
		body, err := io.ReadAll(io.LimitReader(ar, hdr.HeaderSize+hdr.PayloadSize))
		if err != nil {
			return h, err
		}
		if hdr.Sequence == 0 {
			if consumer != nil {
				if err := consumer(hdr.Name, body); err != nil {
					return h, err
				}
			}
			continue
		}
		if msg != nil {
			m := ArchivedMessage{Seq: hdr.Sequence, Time: hdr.Timestamp, Subject: hdr.Name, Header: body[:hdr.HeaderSize], Data: body[hdr.HeaderSize:]}
			if len(m.Header) == 0 {
				m.Header = nil
			}
			if err := msg(m); err != nil {
				return h, err
			}
		}
	}
}
