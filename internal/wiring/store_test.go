package wiring_test

import (
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/jsbus"
)

// A keeper whose store is on the network gets the small in-flight budget;
// one with a directory, the adapter's default.
func TestInFlightFor(t *testing.T) {
	for u, want := range map[string]int64{
		"":                           jsbus.DefaultInFlight,
		"file:///var/lib/keeper":     jsbus.DefaultInFlight,
		"nats://vault:4222/kept":     wiring.RemoteInFlight,
		"tls://vault:4222/kept":      wiring.RemoteInFlight,
		"s3://points/keeper":         wiring.RemoteInFlight,
		"gopher://somewhere/unknown": jsbus.DefaultInFlight,
	} {
		if got := wiring.InFlightFor(u); got != want {
			t.Errorf("InFlightFor(%q) = %d, want %d", u, got, want)
		}
	}
}
