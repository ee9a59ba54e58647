package busarchive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// FormatVersion is the archive format this package writes. Every format it has
// ever written stays readable.
const FormatVersion = 1

// Entry names inside bus.tar.
const (
	ManifestName = "manifest.json"
	StreamsDir   = "streams"
	DataName     = "stream.arc.s2" // jsm.SnapshotDataFile
	MetaName     = "backup.json"   // jsm.SnapshotMetaFile
)

// Manifest is manifest.json, the archive's last entry and commit mark.
type Manifest struct {
	Format        int              `json:"format"`
	KeeperVersion string           `json:"keeper_version"`
	ServerVersion string           `json:"server_version"`
	Created       time.Time        `json:"created"`
	Streams       []StreamManifest `json:"streams"`
	// Seal is the SHA-256 (lower-case hex) of manifest.json's own bytes as
	// they were before the seal was appended, so a changed byte anywhere in
	// the manifest is found. The writer sets it; Open checks it.
	Seal string `json:"seal,omitempty"`
}

// StreamManifest describes one stream of the archive.
type StreamManifest struct {
	Name   string       `json:"name"`
	Config StreamConfig `json:"config"`
	State  StreamState  `json:"state"`
	// Cut, set when the stream's snapshot was cut at a moment (CutWriter),
	// is what its archive holds; State stays the server's.
	Cut     *StreamCut `json:"cut,omitempty"`
	Entries []EntrySum `json:"entries"`
}

// StreamConfig is the stream's configuration as the manifest records it:
// backup.json's "config", the configuration the server answered the snapshot
// request with, kept as its JSON bytes (Raw) and never re-encoded from a
// type of this package's or a client library's, so that a manifest reads and
// writes the same bytes whatever fields a later server or library adds.
// Name and Subjects, the fields the keeper reads, are parsed from Raw.
//
// It encodes as Raw. A StreamConfig made by hand, without Raw, encodes as
// its Name and Subjects alone; one whose Name or Subjects were changed after
// it was read refuses to encode, since Raw would not say so.
type StreamConfig struct {
	Raw      json.RawMessage
	Name     string
	Subjects []string
}

// configFields is the part of a stream configuration this package reads.
type configFields struct {
	Name     string   `json:"name"`
	Subjects []string `json:"subjects,omitempty"`
}

// UnmarshalJSON keeps b as Raw and parses Name and Subjects from it. A null
// leaves the configuration empty, as it would leave a struct.
func (c *StreamConfig) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var f configFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*c = StreamConfig{Raw: bytes.Clone(b), Name: f.Name, Subjects: f.Subjects}
	return nil
}

// MarshalJSON gives Raw (json.Marshal then compacts and indents it with the
// rest of the document), or, when there is none, Name and Subjects.
func (c StreamConfig) MarshalJSON() ([]byte, error) {
	if c.Raw == nil {
		return json.Marshal(configFields{Name: c.Name, Subjects: c.Subjects})
	}
	var f configFields
	if err := json.Unmarshal(c.Raw, &f); err != nil {
		return nil, fmt.Errorf("the stream configuration is not a JSON object: %w", err)
	}
	if f.Name != c.Name || !slices.Equal(f.Subjects, c.Subjects) {
		return nil, errors.New("the stream configuration's Name or Subjects differ from its recorded bytes (Raw)")
	}
	return c.Raw, nil
}

// StreamState is the stream's state at snapshot time, as the server reported it.
type StreamState struct {
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Msgs      uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	Consumers int    `json:"consumers"`
}

// EntrySum is one tar entry's full name, size and SHA-256 (lower-case hex).
type EntrySum struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Bytes is the sum of the sizes of every entry the manifest names.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, s := range m.Streams {
		for _, e := range s.Entries {
			n += e.Size
		}
	}
	return n
}

// Stream returns the manifest of the named stream, or nil.
func (m *Manifest) Stream(name string) *StreamManifest {
	for i := range m.Streams {
		if m.Streams[i].Name == name {
			return &m.Streams[i]
		}
	}
	return nil
}

// StreamNames is the names of m's streams, in its order.
func (m *Manifest) StreamNames() []string {
	out := make([]string, 0, len(m.Streams))
	for _, s := range m.Streams {
		out = append(out, s.Name)
	}
	return out
}
