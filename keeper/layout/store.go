// Package layout owns where a keeper's data lies and how its records are
// written: the object keys of points and asides in the store
// (points/<module>/<local>/f<form>-<fingerprint>, aside/<id>, each an
// archive and a record beside it), the index keys of points and plans, the
// JSON shape every record object takes (RecordJSON), and the bound a record
// is read back within. Points, asides and journals already written are read
// by every later keeper, so nothing here may change a byte of what is
// written or read.
//
// It imports the standard library only; the engine (package keeper) and the
// tools over a store import it. The encodings over the contract's types (a
// point's and an aside's index record, the size of their consumers'
// positions) are the engine's until those types have a package of their
// own, standard library only, that this one may import.
package layout

import (
	"path"
	"strconv"
	"strings"
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
