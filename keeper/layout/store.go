// Package layout owns where a keeper's data lies and how its records are
// written: the object keys of points and asides in the store
// (points/<module>/<local>/f<form>-<fingerprint>, aside/<id>, each an
// archive and a record beside it), the index keys of points and plans, the
// JSON shape every record object takes (RecordJSON), and the bound a record
// is read back within. Points, asides and journals already written are read
// by every later keeper, so nothing here may change a byte of what is
// written or read.
//
// It also reads a point's or an aside's record from a store (ReadRecord,
// checking it is the record of its place), names the archive a record
// describes (ArchiveKeyOf) and checks the record's sealing (CheckSealing).
//
// It imports the contract (kept) and the store, nothing else of the module;
// the engine (package keeper), the archive opener (keeper/archives) and the
// tools over a store (package transfer) import it. The index encodings over
// the contract's types (a point's and an aside's index record, the size of
// their consumers' positions) are still the engine's (keeper/records.go,
// recordsize.go).
package layout

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// Layout in the store (design.md, Files), as object keys. A point or an
// aside is its archive and its record; the record is its commit mark,
// written last: a prefix whose record is missing holds no point or aside,
// only leftovers that the keeper's sweep removes.
const (
	PointsDir   = "points"
	AsideDir    = "aside"
	ArchiveName = "bus.tar"
	SealedName  = "bus.tar.age" // an encrypted archive
	PointFile   = "point.json"
	AsideFile   = "aside.json"
)

// PointRel is the key prefix of a point.
func PointRel(module, local string, form int, fingerprint string) string {
	return path.Join(PointsDir, module, local, "f"+strconv.Itoa(form)+"-"+fingerprint)
}

// AsideRel is the key prefix of an aside.
func AsideRel(id string) string { return path.Join(AsideDir, id) }

// ArchiveKey is the key of the plain archive (bus.tar) at rel.
func ArchiveKey(rel string) string { return rel + "/" + ArchiveName }

// SealedKey is the key of the encrypted archive (bus.tar.age) at rel.
func SealedKey(rel string) string { return rel + "/" + SealedName }

// RecordKey is the commit mark of a point or an aside.
func RecordKey(rel string) string {
	if IsAsideRel(rel) {
		return rel + "/" + AsideFile
	}
	return rel + "/" + PointFile
}

// IsAsideRel reports whether rel is an aside's prefix, not a point's.
func IsAsideRel(rel string) bool { return strings.HasPrefix(rel, AsideDir+"/") }

// IsRecordPlace reports whether rel has the shape of a point's or an
// aside's prefix; other objects are not the keeper's to sweep.
func IsRecordPlace(rel string) bool {
	parts := strings.Split(rel, "/")
	return (len(parts) == 4 && parts[0] == PointsDir) || (len(parts) == 2 && parts[0] == AsideDir)
}

// KeptOf is the kept data a point's or aside's prefix belongs to.
func KeptOf(rel string) (module, local string) {
	parts := strings.Split(rel, "/")
	if parts[0] == AsideDir {
		module, local, _ = kept.ParseAsideID(parts[1])
		return module, local
	}
	return parts[1], parts[2]
}

// KeyIndexName is the object, in a point's directory, that holds stream's
// key index: keys-<stream>.idx, or keys-<stream>.idx.age when the point is
// encrypted (sealed as its archive is). A stream name is a plain name (no
// dot, no slash), so the name is one.
func KeyIndexName(stream string, sealed bool) string {
	if sealed {
		return "keys-" + stream + ".idx.age"
	}
	return "keys-" + stream + ".idx"
}

// IsKeyIndexName reports whether name, an object's name in a point's
// directory, is a key index's.
func IsKeyIndexName(name string) bool {
	return strings.HasPrefix(name, "keys-") && (strings.HasSuffix(name, ".idx") || strings.HasSuffix(name, ".idx.age"))
}

// MomentRel is the prefix of the point of a moment made from the chain whose
// base point is baseRel (points/<module>/<local>/f<form>-<fingerprint>): a
// point of the same kept data and form, fingerprint at-<UTC stamp, to the
// millisecond>. An incremental point's archive is that point's.
func MomentRel(baseRel string, at time.Time) string {
	dir, name := path.Split(baseRel)
	form, _, _ := strings.Cut(name, "-")
	return dir + form + "-at-" + MomentStamp(at)
}

// MomentStamp is at as the stamp of a moment's fingerprint.
func MomentStamp(at time.Time) string {
	return strings.ReplaceAll(at.UTC().Format("20060102T150405.000Z"), ".", "")
}
