package keeper

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// locatePoint finds the point a request names: by from (a directory that must
// resolve, without symlinks, to a point inside the keeper's directory) or by
// module, local, form and fingerprint. The point's own record must name the
// requested kept data.
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
			return nil, "", errorf(ErrNotFound, "there is no restore point %s", k.abs(rel))
		}
		return nil, "", withKind(ErrBadRequest, err)
	}
	var p Point
	if err := readJSON(filepath.Join(k.abs(rel), pointFile), &p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", errorf(ErrNotFound, "%s holds no point.json", k.abs(rel))
		}
		return nil, "", errorf(ErrDamaged, "%s: %v", k.abs(rel), err)
	}
	if r.Module != "" && (p.Module != r.Module || p.Local != r.Local) {
		return nil, "", errorf(ErrBadRequest, "the restore point in %s is of %s/%s, not of %s/%s", k.abs(rel), p.Module, p.Local, r.Module, r.Local)
	}
	if want := pointRel(p.Module, p.Local, p.Form, p.Fingerprint); want != rel {
		return nil, "", errorf(ErrDamaged, "the restore point in %s says it is %s, which belongs in %s", k.abs(rel), pointName(&p), k.abs(want))
	}
	return &p, rel, nil
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
	if len(parts) != 4 || parts[0] != pointsDir {
		return "", errorf(ErrBadRequest, "from %.200q is not a restore point directory (points/<module>/<local>/f<form>-<fingerprint>)", from)
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
