package keeper

import (
	"errors"
	"strings"
	"testing"
)

// What this keeper writes names its format; a journal or record of a newer
// one is refused with the sentence that says which keeper to run.
func TestFormatWrittenAndRefused(t *testing.T) {
	head := encodeHead(&journal{Module: "billing", Local: "ledger", WrittenBy: "1.2.0"})
	if !strings.Contains(string(head), `"format":1`) || !strings.Contains(string(head), `"written-by":"1.2.0"`) {
		t.Fatalf("a journal head names no format or writer: %s", head)
	}
	var j journal
	if err := decodeJournal(head, &j); err != nil || j.Format != JournalFormat || j.Module != "billing" {
		t.Fatalf("this keeper's own journal: %+v, %v", j, err)
	}
	for _, rec := range [][]byte{pointRecord(&Point{Module: "billing"}), asideRecord(&Aside{ID: "billing.ledger.20260101T000000"})} {
		if !strings.Contains(string(rec), `"format":1`) {
			t.Fatalf("an index record names no format: %s", rec)
		}
	}

	newer := []byte(`{"module":"billing","local":"ledger","format":3,"written-by":"1.4.0","step":"restore","reposition":[]}`)
	err := decodeJournal(newer, &j)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Format != 3 || fe.Reads != JournalFormatDelta || KindOf(err) != ErrConflict {
		t.Fatalf("a journal of format 3: %v (kind %v)", err, KindOf(err))
	}
	want := "a restore journal in the index was written by a newer keeper (format 3, this keeper reads up to 2); run nats-keeper 1.4.0 or newer"
	if err.Error() != want {
		t.Fatalf("said %q, want %q", err, want)
	}
	var p Point
	err = decodeRecord("index record point.billing.ledger.3.f1", []byte(`{"module":"billing","format":7}`), &p)
	want = "index record point.billing.ledger.3.f1 was written by a newer keeper (format 7, this keeper reads up to 3); run a newer nats-keeper (one that reads format 7)"
	if err == nil || err.Error() != want {
		t.Fatalf("a record of format 7 without its writer: %v, want %q", err, want)
	}
	// The writer's version is outside input: repeated only when it reads as one.
	err = decodeRecord("a record", []byte(`{"format":4,"written-by":"1.0; rm -rf /"}`), &p)
	if err == nil || strings.Contains(err.Error(), "rm -rf") {
		t.Fatalf("a record naming a writer that is no version: %v", err)
	}
	// Older records, without a format, and this one's are read.
	for _, data := range []string{`{"module":"billing"}`, `{"module":"billing","format":1}`} {
		if err := decodeRecord("a record", []byte(data), &p); err != nil || p.Module != "billing" {
			t.Fatalf("%s: %+v, %v", data, p, err)
		}
	}
}

// FuzzCheckFormat: any record either passes (its format is one this keeper
// reads, or it does not decode: its reader says so) or is refused with a
// *FormatError of a newer format whose sentence repeats the writer's version
// only when it reads as a short version.
func FuzzCheckFormat(f *testing.F) {
	for _, s := range []string{`{}`, `{"format":1}`, `{"format":2,"written-by":"1.4.0"}`, `{"format":9,"written-by":"x y"}`,
		`{"format":"2"}`, `{"format":-1}`, `[1]`, ``, `{"format":2,"written-by":"` + strings.Repeat("1", 100) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := checkFormat("a record", data, RecordFormatIncremental)
		if err == nil {
			return
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Format <= RecordFormatIncremental || KindOf(err) != ErrConflict {
			t.Fatalf("refused with %v", err)
		}
		if fe.WrittenBy != "" && (len(fe.WrittenBy) > maxVersionText || !plainVersion(fe.WrittenBy)) {
			t.Fatalf("repeats the writer's version %q", fe.WrittenBy)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Fatalf("the sentence spans lines: %q", err)
		}
	})
}
