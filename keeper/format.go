package keeper

import (
	"encoding/json"
	"fmt"
)

// The formats of what one keeper writes for another to read: the restore
// journals (journal.<module>.<local>) and the records of points, asides and
// plans, in the index and in the store. Each carries its format as an added
// integer field, "format", that keepers before it ignore (a record without
// one is of format 1), and, where the writer knows it, its own version,
// "written-by". A keeper that meets a format above the one it reads refuses
// only that record or journal, with a sentence that names the version to run
// (FormatError), and serves everything else.
//
// A format is raised only when a change would be misread by the keepers
// before it; a field they may ignore needs no new format.
const (
	// JournalFormat is the format of the restore journals this keeper
	// writes, and the highest it reads.
	JournalFormat = 1
	// RecordFormat is the format of the point, aside and plan records this
	// keeper writes, and the highest it reads.
	RecordFormat = 1

	// JournalFormatDelta is the format of a journal whose restore rolls
	// streams back by the delta method, and RecordFormatTails of an
	// aside's record that holds a tail of one (StreamSum.Base): a keeper
	// before them would misread either (carry a delta's journal on as a
	// full restore's, put a tail back as a whole stream), so they are
	// written only then, and every other journal and record keeps format
	// 1. This keeper reads up to them.
	JournalFormatDelta = 2
	RecordFormatTails  = 2
	// RecordFormatIncremental is the format of an incremental point's
	// record (Point.Incremental): a keeper before it would take the point
	// for one whose archive is missing. This keeper reads up to it.
	RecordFormatIncremental = 3
)

// FormatError is a journal or record written by a newer keeper in a format
// this keeper does not read. It is a kind of conflict: it does not go away by
// waiting, only by running a newer keeper.
type FormatError struct {
	What      string // what was read: "restore journal journal.billing.ledger"
	Format    int    // its format
	Reads     int    // the highest format this keeper reads
	WrittenBy string // the version of the keeper that wrote it, when it says
}

func (e *FormatError) Error() string {
	run := "a newer nats-keeper (one that reads format " + fmt.Sprint(e.Format) + ")"
	if e.WrittenBy != "" {
		run = "nats-keeper " + e.WrittenBy + " or newer"
	}
	return fmt.Sprintf("%s was written by a newer keeper (format %d, this keeper reads up to %d); run %s",
		e.What, e.Format, e.Reads, run)
}

// Unwrap makes a FormatError a conflict for errors.Is and KindOf.
func (e *FormatError) Unwrap() error { return ErrConflict }

// maxVersionText bounds the writer's version a FormatError repeats: it is
// read from the index, outside input.
const maxVersionText = 64

// checkFormat refuses data (one JSON record of what) whose "format" is above
// reads. Data that does not decode is not refused here: its reader says so.
func checkFormat(what string, data []byte, reads int) error {
	var head struct {
		Format    int    `json:"format"`
		WrittenBy string `json:"written-by"`
	}
	if json.Unmarshal(data, &head) != nil || head.Format <= reads {
		return nil
	}
	by := head.WrittenBy
	if len(by) > maxVersionText || !plainVersion(by) {
		by = ""
	}
	return &FormatError{What: what, Format: head.Format, Reads: reads, WrittenBy: by}
}

// plainVersion reports whether v reads as a version (letters, digits and
// . - + only), safe to repeat in a sentence.
func plainVersion(v string) bool {
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-' || r == '+') {
			return false
		}
	}
	return true
}
