package keeper

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzPositionsSize checks that the sizes checkPositionsFit and BoundReply
// work out without writing the positions are the sizes json.Marshal writes
// them, and a reply holding them, at, whatever the names and configurations
// (whitespace, characters json.Marshal escapes, beyond ASCII, no
// configuration at all).
func FuzzPositionsSize(f *testing.F) {
	f.Add("s", "c", uint64(0), []byte(`{"durable_name":"c","ack_policy":"explicit"}`))
	f.Add("KV_x", "a\"b", uint64(1<<63), []byte(`{ "description" : "<&> \u2028 \u2029 é", "metadata": {"k": "v"} }`))
	f.Add("s", "c<", uint64(7), []byte("{\"d\":\"\xe2\x80\xa8\xe2\x80\xa9\xff\\\"\"}"))
	f.Add("s", "c", uint64(7), []byte(nil))
	f.Add("s", "c", uint64(18446744073709551615), []byte(`[1,2,{"a":"\\u003c"}]`))
	f.Fuzz(func(t *testing.T, stream, consumer string, floor uint64, cfg []byte) {
		p := Position{Stream: stream, Consumer: consumer, AckFloor: floor}
		if cfg != nil {
			if !json.Valid(cfg) {
				return // a configuration was decoded from JSON, so it is valid JSON
			}
			p.Config = cfg
		}
		for _, ps := range [][]Position{{p}, {p, p, p}} {
			data, err := json.Marshal(ps)
			if err != nil {
				t.Fatal(err)
			}
			if got := positionsSize(ps); got != len(data) {
				t.Fatalf("positionsSize %d, json.Marshal wrote %d bytes: %s", got, len(data), data)
			}
			rep := &Reply{Said: "snapshot-kept took it", Positions: ps, Point: &Point{Module: "m", Positions: ps},
				Aside: &Aside{ID: "a", Positions: ps[:1]}}
			if data, err = json.Marshal(rep); err != nil {
				t.Fatal(err)
			}
			if got, err := replySize(rep); err != nil || got != len(data) {
				t.Fatalf("replySize %d (%v), json.Marshal wrote %d bytes: %s", got, err, len(data), data)
			}
		}
	})
}

// TestPointJSONIsRecordJSON: a point whose positions were encoded ahead
// reads back as the point written by recordJSON, small (indented) or big
// (compact).
func TestPointJSONIsRecordJSON(t *testing.T) {
	for _, n := range []int{1, 3, 400} {
		p := &Point{Module: "m", Local: "l", Form: 2, Fingerprint: "f", Dir: "points/m/l/f2-f", PositionCount: n}
		for i := range n {
			p.Positions = append(p.Positions, Position{Stream: "s", Consumer: "c" + string(rune('a'+i%26)), AckFloor: uint64(i),
				Config: json.RawMessage(`{"durable_name":"c", "ack_policy":"explicit","metadata":{"k":"<&>"},"description":"` + strings.Repeat("d", 300) + `"}`)})
		}
		ps, err := json.Marshal(p.Positions)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pointJSON(p, ps)
		if err != nil {
			t.Fatal(err)
		}
		want, err := recordJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		var g, w Point
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%d positions: pointJSON wrote %s: %v", n, got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("%d positions: pointJSON reads back as\n%s\nwant\n%s", n, gj, wj)
		}
		if got[1] != want[1] {
			t.Errorf("%d positions: indented %v, recordJSON %v", n, got[1] == '\n', want[1] == '\n')
		}
	}
}
