package natsstore

import (
	"fmt"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/storetest"
)

// TestContract runs the contract suite on a bucket of one server and on an
// R3 bucket of a three-node cluster, each subtest on a new bucket. The
// servers run in a child process, so the suite's heap bounds measure the
// store alone.
func TestContract(t *testing.T) {
	for _, c := range []struct {
		name              string
		servers, replicas int
	}{{"single", 1, 1}, {"R3", 3, 3}} {
		t.Run(c.name, func(t *testing.T) {
			js := serversProcess(t, c.servers)
			n := 0
			storetest.Run(t, func(t *testing.T) store.Store {
				n++
				return open(t, js, fmt.Sprintf("contract%d", n), Options{Replicas: c.replicas})
			})
		})
	}
}
