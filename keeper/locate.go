package keeper

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// locatePoint finds what a restore request names: by from (a restore point
// directory, or aside/<id> to put a set-aside copy back; either must resolve,
// without symlinks, inside the keeper's directory) or by module, local, form
// and fingerprint. Its own record must name the requested kept data. A
// set-aside copy is returned as a Point whose Dir is aside/<id>.
func (k *Keeper) locatePoint(r Request) (*Point, string, error) {
	rel := pointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	if r.From != "" {
		var err error
		if rel, err = k.relFrom(r.From); err != nil {
			return nil, "", err
		}
	}
	if err := k.checkNoLinks(rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if isAsideRel(rel) {
				return nil, "", errorf(ErrNotFound, "there is no set-aside copy %s", k.abs(rel))
			}
			return nil, "", errorf(ErrNotFound, "there is no restore point %s", k.abs(rel))
		}
		return nil, "", withKind(ErrBadRequest, err)
	}
	p, err := k.readSource(rel)
	if err != nil {
		return nil, "", err
	}
	if r.Module != "" && (p.Module != r.Module || p.Local != r.Local) {
		return nil, "", errorf(ErrBadRequest, "the %s in %s is of %s/%s, not of %s/%s", sourceName(p), k.abs(rel), p.Module, p.Local, r.Module, r.Local)
	}
	if err := k.checkPlace(rel, p); err != nil {
		return nil, "", err
	}
	return p, rel, nil
}

// loadSource reads what a restore restores from: a point's point.json, or
// (rel aside/<id>) an aside's aside.json as a Point, and checks that the
// record belongs where it lies.
func (k *Keeper) loadSource(rel string) (*Point, error) {
	p, err := k.readSource(rel)
	if err != nil {
		return nil, err
	}
	return p, k.checkPlace(rel, p)
}

// readSource reads the record of rel, a point or (aside/<id>) an aside.
func (k *Keeper) readSource(rel string) (*Point, error) {
	file := pointFile
	if isAsideRel(rel) {
		file = asideFile
	}
	var p Point
	var a Aside
	var v any = &p
	if isAsideRel(rel) {
		v = &a
	}
	if err := readJSON(filepath.Join(k.abs(rel), file), v); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrNotFound, "%s holds no %s", k.abs(rel), file)
		}
		return nil, errorf(ErrDamaged, "%s: %v", k.abs(rel), err)
	}
	if !isAsideRel(rel) {
		return &p, nil
	}
	if asideRel(a.ID) != rel {
		return nil, errorf(ErrDamaged, "the set-aside copy in %s says it is %s", k.abs(rel), a.ID)
	}
	if k.hasJournal(a.ID) {
		return nil, errorf(ErrConflict, "set-aside copy %s belongs to a restore that has not finished; the keeper finishes it first", a.ID)
	}
	return &Point{Module: a.Module, Local: a.Local, Taken: a.Taken, Caller: a.Caller, Why: a.Why, Dir: rel,
		Streams: a.Streams, Positions: a.Positions, ArchiveSize: a.ArchiveSize}, nil
}

// checkPlace refuses a point record that names another place than rel.
func (k *Keeper) checkPlace(rel string, p *Point) error {
	if isAsideRel(rel) {
		return nil // readSource checked the id
	}
	if want := pointRel(p.Module, p.Local, p.Form, p.Fingerprint); want != rel {
		return errorf(ErrDamaged, "the restore point in %s says it is %s, which belongs in %s", k.abs(rel), pointName(p), k.abs(want))
	}
	return nil
}

func isAsideRel(rel string) bool { return strings.HasPrefix(rel, asideDir+string(filepath.Separator)) }

// sourceName names what a restore restores from, for sentences: "restore
// point billing/ledger f3-9f2c1a7e" or "set-aside copy billing.ledger.…".
func sourceName(p *Point) string {
	if isAsideRel(p.Dir) {
		return "set-aside copy " + filepath.Base(p.Dir)
	}
	return "restore point " + pointName(p)
}

// relFrom turns a from into a layout path relative to the keeper's
// directory, refusing anything that is not points/<m>/<l>/f<form>-<fp>.
func (k *Keeper) relFrom(from string) (string, error) {
	p := from
	if !filepath.IsAbs(p) {
		p = filepath.Join(k.dir, p)
	}
	p = filepath.Clean(p)
	rel, err := filepath.Rel(k.dir, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", errorf(ErrBadRequest, "from %.200q is not inside the keeper's directory %s", from, k.dir)
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) == 2 && parts[0] == asideDir {
		if _, _, err := ParseAsideID(parts[1]); err != nil {
			return "", fmt.Errorf("from %.200q does not name a set-aside copy (aside/<id>): %w", from, err)
		}
		return rel, nil
	}
	if len(parts) != 4 || parts[0] != pointsDir {
		return "", errorf(ErrBadRequest, "from %.200q is not a restore point directory (points/<module>/<local>/f<form>-<fingerprint>) or a set-aside copy (aside/<id>)", from)
	}
	for i, what := range []string{"module", "local", "point directory"} {
		if err := ValidName(what+" in from", parts[i+1]); err != nil {
			return "", err
		}
	}
	if !strings.HasPrefix(parts[3], "f") || !strings.Contains(parts[3], "-") {
		return "", errorf(ErrBadRequest, "from %.200q does not end in f<form>-<fingerprint>", from)
	}
	return rel, nil
}
