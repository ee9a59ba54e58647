package busarchive

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/kept"
)

// Bounds on what an archive may hold. They are far above anything a real bus
// produces and low enough that a damaged or hostile archive cannot make the
// reader allocate or loop without end.
const (
	// MaxStreams is the most streams one archive may hold.
	MaxStreams = 1024
	// MaxStreamNameLen is the longest stream name accepted, in bytes
	// (kept.MaxStreamNameLen).
	MaxStreamNameLen = kept.MaxStreamNameLen
	// MaxDataSize bounds one stream.arc.s2 entry (1 TiB).
	MaxDataSize = int64(1) << 40
	// MaxMetaSize bounds one backup.json entry; the writer holds it in memory.
	MaxMetaSize = 4 << 20
	// MaxManifestSize bounds manifest.json; the reader holds it in memory.
	MaxManifestSize = 16 << 20
	// maxEntries bounds the number of tar entries Open looks at.
	maxEntries = 2*MaxStreams + 1
)

// ValidStreamName reports whether name is acceptable as a JetStream stream
// or consumer name: kept.ValidStreamName, the one rule for such names in
// nats-keeper (the keeper's request checks, the JetStream adapter and the
// archive all apply it). It lives in kept, which imports only the standard
// library, so busarchive can import it.
func ValidStreamName(name string) bool { return kept.ValidStreamName(name) }

// DataEntry is the tar name of a stream's snapshot data.
func DataEntry(stream string) string { return StreamsDir + "/" + stream + "/" + DataName }

// MetaEntry is the tar name of a stream's backup.json.
func MetaEntry(stream string) string { return StreamsDir + "/" + stream + "/" + MetaName }

// parseEntryName checks a tar entry name against the layout. It returns the
// stream and the file name inside the stream's directory, or ("", ManifestName)
// for the manifest. A name outside the layout is an *EntryError of ErrLayout.
func parseEntryName(name string) (stream, file string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", &EntryError{Entry: printable(name), Kind: ErrLayout, Detail: why}
	}
	switch {
	case name == "":
		return bad("the entry has no name")
	case len(name) > len(StreamsDir)+MaxStreamNameLen+len(DataName)+2:
		return bad(fmt.Sprintf("the name is %d bytes long, longer than any name of the layout", len(name)))
	case strings.ContainsRune(name, 0):
		return bad("the name holds a NUL byte")
	case strings.HasPrefix(name, "/"):
		return bad("the name is absolute")
	case strings.ContainsRune(name, '\\'):
		return bad("the name holds a backslash")
	case !utf8.ValidString(name):
		return bad("the name is not valid UTF-8")
	}
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == ".." {
			return bad("the name climbs out of the archive with ..")
		}
	}
	if name == ManifestName {
		return "", ManifestName, nil
	}
	if len(parts) != 3 || parts[0] != StreamsDir || (parts[2] != DataName && parts[2] != MetaName) {
		return bad("the layout holds only manifest.json and streams/<stream>/{stream.arc.s2,backup.json}")
	}
	if !ValidStreamName(parts[1]) {
		return bad(fmt.Sprintf("%q is not a valid stream name", parts[1]))
	}
	return parts[1], parts[2], nil
}

// printable bounds and quotes a name from outside for use in a message.
func printable(name string) string {
	const max = 300
	if len(name) > max {
		name = name[:max] + "…"
	}
	if !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Sprintf("%q", name)
	}
	return name
}
