package keeper

import (
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
		n += positionSize(p) + 1 // kept.PositionSize
	}
	return n
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
