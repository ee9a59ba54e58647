package keeper

import (
	"strings"
	"testing"
	"time"
)

// FuzzMessageTTL: a point's message headers are outside input; messageTTL
// reads any of them without panicking, gives no TTL below a second or
// above its bound, and agrees with the server's reading of the usual forms.
func FuzzMessageTTL(f *testing.F) {
	for _, h := range []string{"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n", "NATS/1.0\r\nNats-TTL: 90\r\n\r\n", "NATS/1.0\r\nNats-TTL: never\r\n\r\n",
		"NATS/1.0\r\nNats-TTL:1h\r\n\r\n", "NATS/1.0\r\nA: b\r\nNats-TTL: 500ms\r\n\r\n", "", "NATS/1.0\r\nNats-TTL: -1\r\n", "NATS/1.0\r\nnats-ttl: 5s\r\n\r\n"} {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, hdr []byte) {
		ttl := messageTTL(hdr)
		if ttl != 0 && (ttl < time.Second || ttl > time.Duration(1<<32)*time.Second) {
			t.Fatalf("messageTTL(%q) = %v", hdr, ttl)
		}
		if ttl%time.Second != 0 {
			t.Fatalf("messageTTL(%q) = %v, not whole seconds", hdr, ttl)
		}
		if !strings.Contains(string(hdr), "\r\nNats-TTL:") && ttl != 0 {
			t.Fatalf("messageTTL(%q) = %v without the header", hdr, ttl)
		}
	})
}

func TestMessageTTLReadsTheServersForms(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n":        5 * time.Second,
		"NATS/1.0\r\nNats-TTL: 90\r\n\r\n":        90 * time.Second,
		"NATS/1.0\r\nNats-TTL: never\r\n\r\n":     0,
		"NATS/1.0\r\nNats-TTL: 500ms\r\n\r\n":     0,
		"NATS/1.0\r\nX: 1\r\nNats-TTL:1m\r\n\r\n": time.Minute,
		"NATS/1.0\r\nnats-ttl: 5s\r\n\r\n":        0, // the server's header lookup is case-sensitive
	} {
		if got := messageTTL([]byte(h)); got != want {
			t.Errorf("messageTTL(%q) = %v, want %v", h, got, want)
		}
	}
}
