package kept_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/kept"
)

// wireBenchReply is a snapshot's reply of a module of n consumers, each
// with an ordinary configuration: its positions twice, in the reply and in
// its point.
func wireBenchReply(n int) *kept.Reply {
	cfg := json.RawMessage(fmt.Sprintf(`{"durable_name":"c","ack_policy":"explicit","deliver_policy":"all","description":%q}`, strings.Repeat("x", 300)))
	rep := &kept.Reply{Said: "Took it.", Point: &kept.Point{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f",
		Dir: "points/billing/ledger/f3-f", Streams: []kept.StreamSum{{Name: "S", FirstSeq: 1, LastSeq: 9}}, ArchiveSize: 1 << 20}}
	for i := range n {
		p := kept.Position{Stream: "ORDERS", Consumer: fmt.Sprintf("billing-%04d", i), AckFloor: uint64(i) * 1000, Config: cfg}
		rep.Positions = append(rep.Positions, p)
		rep.Point.Positions = append(rep.Point.Positions, p)
	}
	return rep
}

// BenchmarkWireReplyEncode writes a reply of 2,000 consumers' positions
// (twice) as the service does; BenchmarkWireRecordDecode reads back a
// point.json of 8,000.
func BenchmarkWireReplyEncode(b *testing.B) {
	rep := wireBenchReply(2000)
	b.ReportAllocs()
	for b.Loop() {
		data, err := json.Marshal(rep)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

func BenchmarkWireRecordDecode(b *testing.B) {
	data, err := json.Marshal(wireBenchReply(8000).Point)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var p kept.Point
		if err := json.Unmarshal(data, &p); err != nil || len(p.Positions) != 8000 {
			b.Fatal(err)
		}
	}
}
