// Package busarchive reads and writes bus.tar, the one file that holds the data of
// a restore point or a set-aside copy.
//
// Format 1 is a plain tar holding, per stream,
//
//	streams/<stream>/stream.arc.s2   the server's snapshot, byte for byte
//	streams/<stream>/backup.json     {"config":…,"state":…} as jsm.go writes it
//
// and manifest.json as the last entry. The manifest is the commit mark: an
// archive without it is incomplete. It records the format version, the keeper's
// and the server's versions, the time, and per stream its configuration, its
// state at snapshot time and every entry's size and SHA-256, and ends with a
// seal: the SHA-256 of the manifest's own bytes, so no byte of the archive
// goes unchecked.
//
// The writer streams each snapshot straight into the file as the chunks arrive:
// a data entry's tar header is written with its size field reserved and patched
// in place once the entry ends, so nothing is spooled and nothing is held whole
// in memory. The reader seeks over the data to find the manifest and hands out
// section readers over each entry for a streaming restore.
//
// The archive may be a file or an object in a store (package store): the
// writer needs only appends and the one patch of each data entry's header
// (which it asks a store to hold back), the reader only ranged reads, a
// handful for Open and one per entry after.
//
// One stream's snapshot can also be taken message by message:
// ReadStreamArchive reads a stream.arc.s2 (its head, consumers and
// messages), StreamArchiveWriter writes one the server restores as its own,
// and BumpLastSeq raises the last sequence its head declares, so a restore
// never lowers a stream's last sequence, rewriting only the head's s2
// chunks (streamarc.go, streamarc_write.go, bump.go).
//
// A server's snapshot can be cut as it passes: CutWriter ends it before
// the first message stamped after a time, re-encoding only the chunk that
// holds that message (cut.go, cut_scan.go).
//
// A stream archive can also be read in part: a KeyIndex, built from its
// bytes as they are written (Indexer), records where each chosen message's
// entry and each s2 chunk lies, with SHA-256s that check a read of it;
// ReadIndexed reads single messages through it in ranged reads
// (keyindex*.go).
//
// The package builds on no NATS client: the server's snapshot is decoded
// with the server module's archive package (its entry format) and s2 alone.
//
// It owns the bus.tar format: its entries, manifest, checks and errors. It
// is a leaf: it imports no package of this module, only the standard
// library, s2, nats-server's archive reader and x/sys.
package busarchive
