package keeper

import (
	"encoding/json"
)

// A point's point.json and an aside's aside.json are read back whole, up to
// maxRecordSize bytes (4 MiB), so they are never written bigger than that.
// Of a record, only the module's consumers' positions grow with the work:
// one each, a few hundred bytes (more with big metadata or many filter
// subjects). The rest (names, a stream sum for each of at most a plan's
// streams, the request's caller and why, the recipients of an encrypted
// archive) takes well under recordRoom. So the positions may take
// MaxPositionsSize bytes, as the record holds them, and a snapshot or an
// aside whose positions would take more is refused before anything is
// taken: the point or the aside could never be read back.
const (
	recordRoom = 512 << 10
	// MaxPositionsSize bounds the positions a point.json or aside.json
	// holds: 3.5 MiB, as the record's compact JSON holds them (about
	// 8,000 consumers of some 450 bytes each).
	MaxPositionsSize = maxRecordSize - recordRoom
)

// positionsSize is how many bytes positions take in a record, exactly as
// putJSON writes them when they come near the bound: compact (recordJSON
// indents only records under indentBelow bytes).
func positionsSize(positions []Position) int {
	if len(positions) == 0 {
		return 0
	}
	n := 1 // [ and ], less the last comma
	for _, p := range positions {
		n += positionSize(p) + 1
	}
	return n
}

// positionSize is len(json.Marshal(p)). It is worked out without writing
// p when its names need no escaping and its configuration is compact JSON
// that json.Marshal writes as it is (printable ASCII, no space, none of
// < > &: as the server writes a configuration with no space in a string):
// writing 2,000 positions out only to measure them took some 5 ms of CPU.
// A configuration is valid JSON: it was decoded from the server's reply or
// from a record.
func positionSize(p Position) int {
	const fixed = len(`{"stream":"","consumer":"","ack-floor":,"config":}`)
	cfg := len(p.Config)
	if p.Config == nil {
		cfg = len("null")
	}
	if plainName(p.Stream) && plainName(p.Consumer) && (p.Config == nil || (cfg > 0 && plainCompact(p.Config))) {
		n := fixed + len(p.Stream) + len(p.Consumer) + digits(p.AckFloor) + cfg
		if WriteOldKeys { // the floor under its old key too (wirecase.go)
			n += len(`,"ack_floor":`) + digits(p.AckFloor)
		}
		return n
	}
	data, _ := json.Marshal(p)
	return len(data)
}

// digits is how many decimal digits n is written with.
func digits(n uint64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// plainName reports whether json.Marshal writes the string s as it is:
// printable ASCII other than the quote, the backslash, <, > and &.
func plainName(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainCompact reports whether json.Marshal writes the valid JSON cfg, as a
// json.RawMessage, as it is: no space or control byte (nothing to compact),
// nothing beyond ASCII (no U+2028 or U+2029 to escape), and none of < > &.
func plainCompact(cfg []byte) bool {
	for _, c := range cfg {
		if c <= 0x20 || c > 0x7e || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// checkPositionsFit refuses, with ErrConflict, positions that would make
// the record file (point.json or aside.json) bigger than a keeper reads back.
func checkPositionsFit(positions []Position, file string) error {
	if n := positionsSize(positions); n > MaxPositionsSize {
		return Errorf(ErrConflict, "the module's %d consumer position(s) take %d bytes as %s would hold them, over the %d it may give them (it is read back only up to %d bytes)",
			len(positions), n, file, MaxPositionsSize, maxRecordSize)
	}
	return nil
}

// checkRecordSize refuses a record that a keeper would not read back.
func checkRecordSize(key string, data []byte) error {
	if len(data) > maxRecordSize {
		return Errorf(ErrConflict, "%s would be %d bytes, over the %d a keeper reads back, so it was not written", key, len(data), maxRecordSize)
	}
	return nil
}
