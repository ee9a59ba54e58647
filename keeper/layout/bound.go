package layout

// A point's point.json and an aside's aside.json are read back whole, up to
// MaxRecordSize bytes (4 MiB), so they are never written bigger than that.
// Of a record, only the module's consumers' positions grow with the work:
// one each, a few hundred bytes (more with big metadata or many filter
// subjects). The rest (names, a stream sum for each of at most a plan's
// streams, the request's caller and why, the recipients of an encrypted
// archive) takes well under RecordRoom. So the positions may take
// MaxPositionsSize bytes, as the record holds them, and a snapshot or an
// aside whose positions would take more is refused before anything is
// taken: the point or the aside could never be read back.
const (
	// MaxRecordSize bounds point.json and aside.json.
	MaxRecordSize = 4 << 20
	// RecordRoom is what a record's other fields may take beside its
	// positions.
	RecordRoom = 512 << 10
	// MaxPositionsSize bounds the positions a point.json or aside.json
	// holds: 3.5 MiB, as the record's compact JSON holds them (about
	// 8,000 consumers of some 450 bytes each).
	MaxPositionsSize = MaxRecordSize - RecordRoom
)
