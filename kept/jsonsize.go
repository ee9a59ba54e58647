package kept

import "encoding/json"

// PositionSize is len(json.Marshal(p)). It is worked out without writing
// p when its names need no escaping and its configuration is compact JSON
// that json.Marshal writes as it is (printable ASCII, no space, none of
// < > &: as the server writes a configuration with no space in a string):
// writing 2,000 positions out only to measure them took some 5 ms of CPU.
// A configuration is valid JSON: it was decoded from the server's reply or
// from a record.
func PositionSize(p Position) int {
	const fixed = len(`{"stream":"","consumer":"","ack-floor":,"config":}`)
	cfg := len(p.Config)
	if p.Config == nil {
		cfg = len("null")
	}
	if plainName(p.Stream) && plainName(p.Consumer) && (p.Config == nil || (cfg > 0 && plainCompact(p.Config))) {
		n := fixed + len(p.Stream) + len(p.Consumer) + digits(p.AckFloor) + cfg
		if WriteOldKeys { // the floor under its old key too (wirecase.go)
			n += len(`,"ack_floor":`) + digits(p.AckFloor)
		}
		return n
	}
	data, _ := json.Marshal(p)
	return len(data)
}

// digits is how many decimal digits n is written with.
func digits(n uint64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// plainName reports whether json.Marshal writes the string s as it is:
// printable ASCII other than the quote, the backslash, <, > and &.
func plainName(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainCompact reports whether json.Marshal writes the valid JSON cfg, as a
// json.RawMessage, as it is: no space or control byte (nothing to compact),
// nothing beyond ASCII (no U+2028 or U+2029 to escape), and none of < > &.
func plainCompact(cfg []byte) bool {
	for _, c := range cfg {
		if c <= 0x20 || c > 0x7e || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
