package layout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// ArchiveKeyOf is the key of the archive the record rec describes:
// bus.tar.age when it is encrypted, bus.tar otherwise (and for a nil rec).
func ArchiveKeyOf(rel string, rec *kept.Point) string {
	if rec != nil && rec.Encrypted != nil {
		return SealedKey(rel)
	}
	return ArchiveKey(rel)
}

// CheckSealing refuses a record whose Sealing does not hold together (it
// is read from the store: outside input).
func CheckSealing(s kept.Sealing) error {
	switch {
	case s.Encrypted == nil && s.Archive != "" && s.Archive != ArchiveName:
		return fmt.Errorf("its record names the archive %.100q, not %s", s.Archive, ArchiveName)
	case s.Encrypted == nil:
		return nil
	case s.Archive != SealedName:
		return fmt.Errorf("its record says the archive is encrypted but names it %.100q, not %s", s.Archive, SealedName)
	case s.Encrypted.Format != "age":
		return fmt.Errorf("its record says the archive is encrypted with %.40q, which this keeper does not know (only age)", s.Encrypted.Format)
	}
	return nil
}

// AsidePoint is an aside as the Point record that restores and checks read.
func AsidePoint(a *kept.Aside) *kept.Point {
	return &kept.Point{Module: a.Module, Local: a.Local, Taken: a.Taken, Caller: a.Caller, Why: a.Why, Dir: a.Dir,
		Streams: a.Streams, Positions: a.Positions, PositionCount: a.PositionCount, ArchiveSize: a.ArchiveSize, ArchiveSum: a.ArchiveSum, Sealing: a.Sealing,
		Incremental: a.Incremental, Base: a.Base, Through: a.Through, At: a.At}
}

// ReadRecord reads a point's or an aside's record in st as its bytes and
// as the Point a restore reads, refusing one that is not the record of rel.
func ReadRecord(ctx context.Context, st store.Store, rel string) ([]byte, *kept.Point, error) {
	o, err := st.Open(ctx, RecordKey(rel))
	if err != nil {
		return nil, nil, err
	}
	defer o.Close()
	if o.Size() > MaxRecordSize {
		return nil, nil, fmt.Errorf("%s is over %d bytes", RecordKey(rel), MaxRecordSize)
	}
	raw := make([]byte, o.Size())
	if _, err := o.ReadAt(raw, 0); err != nil && !(errors.Is(err, io.EOF) && len(raw) == int(o.Size())) {
		return nil, nil, err
	}
	if IsAsideRel(rel) {
		var a kept.Aside
		if err := json.Unmarshal(raw, &a); err != nil || AsideRel(a.ID) != rel {
			return nil, nil, fmt.Errorf("%s is not the aside.json of %s (%v)", RecordKey(rel), rel, err)
		}
		return raw, AsidePoint(&a), nil
	}
	var p kept.Point
	if err := json.Unmarshal(raw, &p); err != nil || PointRel(p.Module, p.Local, p.Form, p.Fingerprint) != rel {
		return nil, nil, fmt.Errorf("%s is not the point.json of %s (%v)", RecordKey(rel), rel, err)
	}
	return raw, &p, nil
}

// CheckKeyIndex refuses a key index record of stream in a point whose
// record rec is that names another object than KeyIndexName (the record
// is read from the store: outside input), or no size or checksum.
func CheckKeyIndex(stream string, ki *kept.KeyIndex, rec *kept.Point) error {
	want := KeyIndexName(stream, rec != nil && rec.Encrypted != nil)
	switch {
	case ki.Object != want:
		return fmt.Errorf("its record names the key index of stream %s %.100q, not %s", stream, ki.Object, want)
	case ki.Size <= 0 || ki.Sum == "":
		return fmt.Errorf("its record names the key index of stream %s with no size or checksum", stream)
	}
	return nil
}
