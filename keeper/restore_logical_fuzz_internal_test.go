package keeper

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzWritableHeader feeds the header reading of a logical restore (a
// message's stored header block, read from an archive or the bus) with any
// bytes: it never panics, what it writes is a header block or nil, never
// carries a header that makes the server remove or refuse, and keeps every
// other header line it read.
func FuzzWritableHeader(f *testing.F) {
	f.Add([]byte("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n"))
	f.Add([]byte("NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n\r\n"))
	f.Add([]byte("NATS/1.0\r\nNats-Msg-Id: 1\r\nNats-Expected-Last-Sequence: 4\r\nX: y\r\n\r\n"))
	f.Add([]byte("NATS/1.0 100 Idle\r\n\r\n"))
	f.Add([]byte("NATS/1.0\r\nno colon\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, header []byte) {
		out := writableHeader(header)
		kvGone(header)
		if out == nil {
			return
		}
		if !bytes.HasPrefix(out, []byte("NATS/1.0\r\n")) || !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
			t.Fatalf("not a header block: %q", out)
		}
		kept := headerLines(out)
		for _, line := range kept {
			k, _, _ := strings.Cut(line, ":")
			k = strings.ToLower(strings.TrimSpace(k))
			if k == "nats-rollup" || k == "nats-msg-id" || strings.HasPrefix(k, "nats-expected-") {
				t.Fatalf("kept %q", line)
			}
		}
		n := 0
		for _, line := range headerLines(header) {
			k, _, _ := strings.Cut(line, ":")
			k = strings.ToLower(strings.TrimSpace(k))
			if !(k == "nats-rollup" || k == "nats-msg-id" || strings.HasPrefix(k, "nats-expected-")) {
				n++
			}
		}
		if n != len(kept) {
			t.Fatalf("read %d lines to keep, wrote %d: %q from %q", n, len(kept), out, header)
		}
	})
}
