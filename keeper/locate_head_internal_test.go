package keeper

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// A record read for its head alone (readHead) is the whole record without
// its positions, for points and asides: a json tag renamed on one side
// would read them all again, or lose a field.
func TestHeadOfLeavesOnlyThePositions(t *testing.T) {
	ps := []Position{{Stream: "billing_ledger", Consumer: "reader", AckFloor: 7, Config: json.RawMessage(`{"durable_name":"reader"}`)},
		{Stream: "billing_ledger", Consumer: "audit", AckFloor: 3, Config: json.RawMessage(`{"durable_name":"audit"}`)}}
	taken := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	streams := []StreamSum{{Name: "billing_ledger", Messages: 9, Bytes: 900}}
	for _, rec := range []any{
		&Point{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c", Taken: taken, Dir: "points/billing/ledger/f3-9f2c",
			Streams: streams, Positions: ps, PositionCount: len(ps), ArchiveSize: 4096, ArchiveSum: "ab12"},
		&Aside{ID: "billing.ledger.20261205T010203", Module: "billing", Local: "ledger", Taken: taken, Reason: ReasonReplaced,
			Dir: "aside/billing.ledger.20261205T010203", Streams: streams, Positions: ps, PositionCount: len(ps), ArchiveSize: 4096, ArchiveSum: "ab12"},
	} {
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		whole := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		head := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		if err := json.Unmarshal(data, whole); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, headOf(head)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole, rec) {
			t.Fatalf("%T read whole: %+v, want %+v", rec, whole, rec)
		}
		reflect.ValueOf(whole).Elem().FieldByName("Positions").SetZero()
		if !reflect.DeepEqual(head, whole) {
			t.Fatalf("%T read for its head: %+v, want the record without positions %+v", rec, head, whole)
		}
		if n := reflect.ValueOf(head).Elem().FieldByName("PositionCount").Int(); n != 2 {
			t.Fatalf("%T read for its head counts %d positions, want 2", rec, n)
		}
	}
}
