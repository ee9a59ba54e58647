package keeper

import (
	"encoding/json"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
)

// MaxPositionsSize bounds the positions a point.json or aside.json holds
// (package layout says why: layout.MaxPositionsSize); a snapshot or an aside
// whose positions would take more is refused before anything is taken.
const MaxPositionsSize = layout.MaxPositionsSize

// positionsSize is how many bytes positions take in a record, exactly as
// putJSON writes them when they come near the bound: compact
// (layout.RecordJSON indents only records under layout.IndentBelow bytes).
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
	const fixed = len(`{"stream":"","consumer":"","ack_floor":,"config":}`)
	cfg := len(p.Config)
	if p.Config == nil {
		cfg = len("null")
	}
	if layout.PlainName(p.Stream) && layout.PlainName(p.Consumer) && (p.Config == nil || (cfg > 0 && layout.PlainCompact(p.Config))) {
		return fixed + len(p.Stream) + len(p.Consumer) + layout.Digits(p.AckFloor) + cfg
	}
	data, _ := json.Marshal(p)
	return len(data)
}

// checkPositionsFit refuses, with ErrConflict, positions that would make
// the record file (point.json or aside.json) bigger than a keeper reads back.
func checkPositionsFit(positions []Position, file string) error {
	if n := positionsSize(positions); n > MaxPositionsSize {
		return Errorf(ErrConflict, "the module's %d consumer position(s) take %d bytes as %s would hold them, over the %d it may give them (it is read back only up to %d bytes)",
			len(positions), n, file, MaxPositionsSize, layout.MaxRecordSize)
	}
	return nil
}

// checkRecordSize refuses a record that a keeper would not read back.
func checkRecordSize(key string, data []byte) error {
	if len(data) > layout.MaxRecordSize {
		return Errorf(ErrConflict, "%s would be %d bytes, over the %d a keeper reads back, so it was not written", key, len(data), layout.MaxRecordSize)
	}
	return nil
}
