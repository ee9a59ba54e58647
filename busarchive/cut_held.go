package busarchive

import (
	"encoding/json"
	"fmt"
)

// StreamCut is what the archive of a stream cut at a moment holds
// (CutWriter), recorded in the stream's manifest beside the server's
// state, which stays as the server reported it: the messages stamped at or
// before the cut, their bytes as the server counts them (StoredSize),
// their first and last sequence (0 when none), and the first sequence left
// out (0 when the snapshot held nothing after the cut). Subjects, when
// set, is how many subjects those messages have (a KV bucket's keys, an
// object store's objects and chunks); unset, the point knows only that
// they are at most backup.json's count.
type StreamCut struct {
	Msgs     uint64  `json:"messages"`
	Bytes    uint64  `json:"bytes"`
	FirstSeq uint64  `json:"first_seq"`
	LastSeq  uint64  `json:"last_seq"`
	From     uint64  `json:"left_out_from,omitempty"`
	Subjects *uint64 `json:"subjects,omitempty"`
}

// Held is the stream as a restore of its archive leaves it: the state, or,
// for a stream cut, the messages and bytes held, from the first held
// (with none, one past the last sequence), to the state's last sequence,
// up to which the server pads the stream with skipped sequences.
func (s *StreamManifest) Held() StreamState {
	st := s.State
	if s.Cut == nil {
		return st
	}
	st.Msgs, st.Bytes = s.Cut.Msgs, s.Cut.Bytes
	switch {
	case s.Cut.Msgs > 0:
		st.FirstSeq = s.Cut.FirstSeq
	case st.LastSeq > 0:
		st.FirstSeq = st.LastSeq + 1
	}
	return st
}

// Span is what the archive speaks for, as a prefix of the stream it was
// taken of: Held, but up to the sequence before the first one a cut left
// out, since the messages from it on are not in the archive.
func (s *StreamManifest) Span() StreamState {
	st := s.Held()
	if s.Cut != nil && s.Cut.From > 0 {
		st.FirstSeq, st.LastSeq = s.State.FirstSeq, s.Cut.From-1
		if s.Cut.Msgs > 0 {
			st.FirstSeq = s.Cut.FirstSeq
		}
	}
	return st
}

// StoredSize is the bytes the server counts for one message, as
// nats-server 2.15 counts them (filestore.go fileStoreMsgSizeRaw,
// memstore.go memStoreMsgSizeRaw): a file stream's record with its length,
// sequence, time, subject length, header length when there is a header,
// and hash; a memory stream's sequence and time.
func StoredSize(memory bool, subject, header, data int) uint64 {
	n := uint64(subject + header + data)
	switch {
	case memory:
		return n + 16
	case header == 0:
		return n + 30
	}
	return n + 34
}

// StoredInMemory reports whether a stream's configuration (JSON) keeps it
// in memory.
func StoredInMemory(config []byte) bool {
	var c struct {
		Storage string `json:"storage"`
	}
	_ = json.Unmarshal(config, &c)
	return c.Storage == "memory"
}

// SetCut records in the manifest what the archive of the named stream,
// finished, holds when its snapshot was cut (a CutWriter's Held). Call it
// before Commit.
func (w *Writer) SetCut(stream string, c StreamCut) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	for i := range w.streams {
		if w.streams[i].Name == stream {
			w.streams[i].Cut = &c
			return nil
		}
	}
	return fmt.Errorf("stream %s is not finished in the archive, so its cut was not recorded", printable(stream))
}
