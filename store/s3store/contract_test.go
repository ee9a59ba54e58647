package s3store

import (
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/s3test"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/storetest"
)

// TestContract runs the store contract against a real versitygw, a new
// bucket for each subtest.
func TestContract(t *testing.T) {
	srv := startServer(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		srv.bucket = "contract-" + string(rune('a'+n/26)) + string(rune('a'+n%26))
		s3test.MakeBucket(t, srv.endpoint, srv.access, srv.secret, srv.bucket)
		return srv.open(t)
	})
}
