package keeper

import (
	"context"
	"encoding/json"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/store"
)

// The store's layout and the shape of its records are package layout's;
// here are the encodings over the contract's types (Point, Aside, Sealing),
// which move there once those types have a package of their own.

// The index records of points and asides stay small, whatever the number of
// the module's consumers: the positions live in point.json and aside.json in
// the store, beside the archive, and the record only counts them. With
// thousands of consumers the positions alone pass the index's max value
// size. Whoever needs the positions (restore, recovery, verify, copy,
// export) reads the point's own record from the store; list-kept, prune,
// rebuild and the checks of plans and stores read the index, and need none.

// Every record carries its format, RecordFormat (format.go); records read
// from the index or the store pass decodeRecord, which refuses a newer one.

// decodeRecord decodes one point, aside or plan record (what names it, for
// the sentence) into v, refusing one of a format above RecordFormat with a
// *FormatError.
func decodeRecord(what string, data []byte, v any) error {
	if err := checkFormat(what, data, RecordFormatIncremental); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// pointRecord is p's record in the index: p without its positions, which
// it counts.
func pointRecord(p *Point) []byte {
	r := *p
	r.PositionCount, r.Positions = positionCount(p.PositionCount, p.Positions), nil
	r.Format = RecordFormat
	if p.Incremental {
		r.Format = RecordFormatIncremental
	}
	data, _ := json.Marshal(&r)
	return data
}

// asideRecord is a's record in the index: a without its positions, which
// it counts.
func asideRecord(a *Aside) []byte {
	r := *a
	r.PositionCount, r.Positions = positionCount(a.PositionCount, a.Positions), nil
	r.Format = RecordFormat
	if hasTails(a) {
		r.Format = RecordFormatTails
	}
	if a.Incremental {
		r.Format = RecordFormatIncremental
	}
	data, _ := json.Marshal(&r)
	return data
}

// positionCount is how many positions a record stands for: those it
// carries, else (an index record) those it counts.
func positionCount(counted int, carried []Position) int {
	if len(carried) > 0 {
		return len(carried)
	}
	return counted
}

// sealingOf is what a record says of an archive written through w.
func (k *Keeper) sealingOf(w store.Writer) Sealing {
	if sw, ok := w.(*agecrypt.Writer); ok {
		return Sealing{Archive: layout.SealedName, Encrypted: &Encryption{Format: "age", Recipients: k.seal.Recipients(), PlainSize: sw.PlainSize()}}
	}
	return Sealing{}
}

// pointJSON is recordJSON of p whose positions were encoded already
// (positions, json.Marshal of p.Positions; nil: none): the point's
// other fields, then its positions, added last.
func pointJSON(p *Point, positions []byte) ([]byte, error) {
	if len(p.Positions) == 0 || positions == nil {
		return layout.RecordJSON(p)
	}
	c := *p
	c.Positions = nil
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	if data, err = layout.AppendField("a point's record", data, "positions", positions); err != nil {
		return nil, err
	}
	return layout.ShapeRecord(data)
}

// indexedPoint is the point module/local f<form>-<fingerprint> as the
// index records it, or nil when the index has none that reads.
func (k *Keeper) indexedPoint(ctx context.Context, module, local string, form int, fingerprint string) *Point {
	data, err := k.index.Get(ctx, pointKey(module, local, form, fingerprint))
	var p Point
	if err != nil || decodeRecord("point", data, &p) != nil {
		return nil
	}
	return &p
}
