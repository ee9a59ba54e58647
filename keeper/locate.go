package keeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// locatePoint finds what a restore request names: by from (a restore point,
// points/<m>/<l>/f<form>-<fp>, or aside/<id> to put a set-aside copy back;
// relative to the store, or for the file store also as a path inside its
// directory) or by module, local, form and fingerprint. Its own record must
// name the requested kept data. A set-aside copy is returned as a Point
// whose Dir is aside/<id>.
func (k *Keeper) locatePoint(ctx context.Context, r Request) (*Point, string, error) {
	return k.locate(ctx, r, k.readSource)
}

// locatePointHead is locatePoint without the positions (see readHead).
func (k *Keeper) locatePointHead(ctx context.Context, r Request) (*Point, string, error) {
	return k.locate(ctx, r, k.readHead)
}

func (k *Keeper) locate(ctx context.Context, r Request, read func(context.Context, string) (*Point, error)) (*Point, string, error) {
	rel := pointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	if r.From != "" {
		var err error
		if rel, err = k.relFrom(r.From); err != nil {
			return nil, "", err
		}
	}
	p, err := read(ctx, rel)
	if err != nil {
		return nil, "", err
	}
	if r.Module != "" && (p.Module != r.Module || p.Local != r.Local) {
		return nil, "", Errorf(ErrBadRequest, "the %s in %s is of %s/%s, not of %s/%s", sourceName(p), k.abs(rel), p.Module, p.Local, r.Module, r.Local)
	}
	if err := k.checkPlace(rel, p); err != nil {
		return nil, "", err
	}
	return p, rel, nil
}

// loadSource reads what a restore restores from: a point's point.json, or
// (rel aside/<id>) an aside's aside.json as a Point, and checks that the
// record belongs where it lies.
func (k *Keeper) loadSource(ctx context.Context, rel string) (*Point, error) {
	p, err := k.readSource(ctx, rel)
	if err != nil {
		return nil, err
	}
	return p, k.checkPlace(rel, p)
}

// readSource reads the record of rel, a point or (aside/<id>) an aside.
func (k *Keeper) readSource(ctx context.Context, rel string) (*Point, error) {
	return k.readRecord(ctx, rel, false)
}

// readHead is readSource without the positions (PositionCount still says
// how many there are): a module of 2,000 consumers has a record of 1.4 MB,
// most of it positions that the caller, wanting the streams or the sum,
// would only decode to drop.
func (k *Keeper) readHead(ctx context.Context, rel string) (*Point, error) {
	return k.readRecord(ctx, rel, true)
}

// headOf is what a record (*Point or *Aside) is decoded through to leave
// its positions unread (RecordHead).
func headOf(v any) any { return kept.RecordHead(v) }

func (k *Keeper) readRecord(ctx context.Context, rel string, head bool) (*Point, error) {
	var p Point
	var a Aside
	var v any = &p
	if isAsideRel(rel) {
		v = &a
	}
	if head {
		v = headOf(v)
	}
	if err := k.getJSON(ctx, recordKey(rel), v); err != nil {
		switch {
		case errors.Is(err, store.ErrNotFound) && isAsideRel(rel):
			return nil, Errorf(ErrNotFound, "there is no set-aside copy %s", k.abs(rel))
		case errors.Is(err, store.ErrNotFound):
			return nil, Errorf(ErrNotFound, "there is no restore point %s", k.abs(rel))
		case errors.Is(err, store.ErrBadKey):
			return nil, withKind(ErrBadRequest, err)
		case errors.Is(err, store.ErrUnavailable):
			return nil, Errorf(ErrFailed, "reading %s: %w", k.abs(recordKey(rel)), err)
		}
		return nil, Errorf(ErrDamaged, "%s: %v", k.abs(rel), err)
	}
	if !isAsideRel(rel) {
		return &p, nil
	}
	if asideRel(a.ID) != rel {
		return nil, Errorf(ErrDamaged, "the set-aside copy in %s says it is %s", k.abs(rel), a.ID)
	}
	if k.hasJournal(ctx, a.ID) {
		return nil, Errorf(ErrConflict, "set-aside copy %s belongs to a restore that has not finished; the keeper finishes it first", a.ID)
	}
	return asidePoint(&a), nil
}

// checkPlace refuses a point record that names another place than rel.
func (k *Keeper) checkPlace(rel string, p *Point) error {
	if isAsideRel(rel) {
		return nil // readSource checked the id
	}
	if want := pointRel(p.Module, p.Local, p.Form, p.Fingerprint); want != rel {
		return Errorf(ErrDamaged, "the restore point in %s says it is %s, which belongs in %s", k.abs(rel), pointName(p), k.abs(want))
	}
	return nil
}

// sourceName names what a restore restores from, for sentences: "restore
// point billing/ledger f3-9f2c1a7e" or "set-aside copy billing.ledger.…".
func sourceName(p *Point) string {
	if isAsideRel(p.Dir) {
		return "set-aside copy " + path.Base(p.Dir)
	}
	return "restore point " + pointName(p)
}

// relFrom turns a from into a key prefix in the store, refusing anything
// that is not points/<m>/<l>/f<form>-<fp> or aside/<id>. For the file
// store, a path inside its directory is taken too.
func (k *Keeper) relFrom(from string) (string, error) {
	rel := from
	if strings.HasPrefix(from, "/") {
		d := k.store.Describe()
		root := fileDir(d)
		if root != "" {
			root = strings.TrimSuffix(root, "/") + "/"
		}
		clean := path.Clean(from)
		if root == "" || !strings.HasPrefix(clean, root) {
			return "", Errorf(ErrBadRequest, "from %.200q is not inside the keeper's store %s", from, d.URL)
		}
		rel = strings.TrimPrefix(clean, root)
	}
	parts := strings.Split(rel, "/")
	if len(parts) == 2 && parts[0] == asideDir {
		if _, _, err := ParseAsideID(parts[1]); err != nil {
			return "", fmt.Errorf("from %.200q does not name a set-aside copy (aside/<id>): %w", from, err)
		}
		return rel, nil
	}
	if len(parts) != 4 || parts[0] != pointsDir {
		return "", Errorf(ErrBadRequest, "from %.200q is not a restore point (points/<module>/<local>/f<form>-<fingerprint>) or a set-aside copy (aside/<id>)", from)
	}
	for i, what := range []string{"module", "local", "point directory"} {
		if err := ValidName(what+" in from", parts[i+1]); err != nil {
			return "", err
		}
	}
	if !strings.HasPrefix(parts[3], "f") || !strings.Contains(parts[3], "-") {
		return "", Errorf(ErrBadRequest, "from %.200q does not end in f<form>-<fingerprint>", from)
	}
	return rel, nil
}
