package keeper

import (
	"encoding/json"
	"testing"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A record read without its positions (RecordHead) reads the old keys too, and
// leaves the positions unread.
func TestWireHeadReadsOldKeys(t *testing.T) {
	for _, v := range []any{&Point{}, &Aside{}} {
		body := `{"id":"a","archive_size":5,"position_count":2,"archive-sum":"s","positions":[{"ack_floor":1},{"ack_floor":2}]}`
		if err := json.Unmarshal([]byte(body), kept.RecordHead(v)); err != nil {
			t.Fatal(err)
		}
		var size int64
		var count int
		var sum string
		var positions []Position
		switch r := v.(type) {
		case *Point:
			size, count, sum, positions = r.ArchiveSize, r.PositionCount, r.ArchiveSum, r.Positions
		case *Aside:
			size, count, sum, positions = r.ArchiveSize, r.PositionCount, r.ArchiveSum, r.Positions
		}
		if size != 5 || count != 2 || sum != "s" || positions != nil {
			t.Errorf("%T read as %+v", v, v)
		}
	}
}
