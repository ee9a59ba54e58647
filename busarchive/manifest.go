package busarchive

import (
	"time"

	"github.com/nats-io/jsm.go/api"
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
	Name    string           `json:"name"`
	Config  api.StreamConfig `json:"config"`
	State   StreamState      `json:"state"`
	Entries []EntrySum       `json:"entries"`
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
