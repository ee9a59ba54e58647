package keeper

import "github.com/nats-keeper/nats-keeper/keeper/layout"

// The store's layout and the shape of its records are package layout's.
// These short names keep the call sites of the engine's files that other
// work of issue 38 is rewriting at the same time (the restore run's, the
// contract's); once that work is merged they give way to layout's own
// names, a mechanical rewrite.
const (
	pointsDir     = layout.PointsDir
	asideDir      = layout.AsideDir
	archiveName   = layout.ArchiveName
	sealedName    = layout.SealedName
	pointFile     = layout.PointFile
	asideFile     = layout.AsideFile
	maxRecordSize = layout.MaxRecordSize
)

var (
	pointRel      = layout.PointRel
	asideRel      = layout.AsideRel
	archiveKey    = layout.ArchiveKey
	recordKey     = layout.RecordKey
	isAsideRel    = layout.IsAsideRel
	isRecordPlace = layout.IsRecordPlace
	recordJSON    = layout.RecordJSON
	archiveKeyOf  = layout.ArchiveKeyOf
	asidePoint    = layout.AsidePoint
	keptOf        = layout.KeptOf
)
