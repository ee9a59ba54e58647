package keeper

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
)

// describedStore is a store that only describes itself: relFrom asks no
// more.
type describedStore struct {
	store.Store
	d store.Description
}

func (s describedStore) Describe() store.Description { return s.d }

// FuzzRelFrom: a restore's or show-evidence's from is outside input, a
// key prefix in the store or, for the file store, a path inside its
// directory, which may be any directory (--dir). What relFrom accepts is a
// key of the store that names a point (points/<m>/<l>/f<form>-<fp>, plain
// names) or an aside (aside/<id>), and an absolute from is accepted only
// when it is that key inside the store's directory, as a point's path
// there always is; a refusal is a bad request.
func FuzzRelFrom(f *testing.F) {
	for _, c := range [][2]string{
		{"/srv/keeper", "points/billing/ledger/f3-9f2c"},
		{"/srv/keeper", "/srv/keeper/points/billing/ledger/f3-9f2c"},
		{"/srv/keeper", "/srv/keeper/../keeper/aside/billing.ledger.20260101T000000"},
		{"/srv/keeper", "/srv/other/points/billing/ledger/f3-9f2c"},
		{"/srv/a?x", "/srv/a/points/billing/ledger/f3-9f2c"},
		{"/srv/a#x", "/srv/a#x/points/billing/ledger/f3-9f2c"},
		{"/srv/100%", "/srv/100%/points/billing/ledger/f3-9f2c"},
		{"/srv/keeper", "points/../../etc/f1-x"},
		{"/", "/points/m/l/f1-x"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, dir, from string) {
		if !strings.HasPrefix(dir, "/") || path.Clean(dir) != dir {
			return // the file store's directory is absolute and clean
		}
		k := &Keeper{storeView: storeView{store: describedStore{d: store.Description{Kind: "file", URL: "file://" + dir}}}}
		const point = "points/billing/ledger/f3-9f2c"
		if rel, err := k.relFrom(path.Join(dir, point)); rel != point || err != nil {
			t.Fatalf("the path of a point in %s is taken as %q, %v", dir, rel, err)
		}
		rel, err := k.relFrom(from)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("relFrom(%q) in %s: %v is not a bad request", from, dir, err)
			}
			return
		}
		if err := store.CheckKey(rel); err != nil {
			t.Fatalf("relFrom(%q) in %s = %q, not a key: %v", from, dir, rel, err)
		}
		parts := strings.Split(rel, "/")
		switch {
		case len(parts) == 2 && parts[0] == asideDir:
			if _, _, err := ParseAsideID(parts[1]); err != nil {
				t.Fatalf("relFrom(%q) = %q: %v", from, rel, err)
			}
		case len(parts) == 4 && parts[0] == pointsDir:
			for _, p := range parts[1:] {
				if ValidName("part", p) != nil {
					t.Fatalf("relFrom(%q) = %q, whose %q is not a plain name", from, rel, p)
				}
			}
		default:
			t.Fatalf("relFrom(%q) = %q, neither a point nor an aside", from, rel)
		}
		if strings.HasPrefix(from, "/") && path.Clean(from) != path.Join(dir, rel) {
			t.Fatalf("relFrom(%q) in %s = %q, which is %s, not the path given", from, dir, rel, path.Join(dir, rel))
		}
		if !strings.HasPrefix(from, "/") && from != rel {
			t.Fatalf("relFrom(%q) = %q", from, rel)
		}
	})
}

// A file store's directory is said, and taken in a from, as it is, though
// it holds characters a URL reserves.
func TestFileStoreDirWithURLCharacters(t *testing.T) {
	for _, dir := range []string{"/srv/a?x", "/srv/a#x", "/srv/100%", "/srv/a b"} {
		k := &Keeper{storeView: storeView{store: describedStore{d: store.Description{Kind: "file", URL: "file://" + dir}}}}
		const point = "points/billing/ledger/f3-9f2c"
		if got := k.abs(point); got != dir+"/"+point {
			t.Errorf("abs in %s: %s", dir, got)
		}
		if rel, err := k.relFrom(dir + "/" + point); rel != point || err != nil {
			t.Errorf("relFrom in %s: %q, %v", dir, rel, err)
		}
		if _, err := k.relFrom(strings.SplitN(dir, "?", 2)[0] + "/" + point); dir == "/srv/a?x" && err == nil {
			t.Errorf("a from outside %s was taken", dir)
		}
	}
}
