package jsbus

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A replicated index answers a write by revision with 10164, not 10071,
// when another write of the same key is still being agreed on (two keepers
// taking one lease at once): it is a wrong revision too, not a failure of
// the bus.
func TestWrongRevisionOfAReplicatedIndex(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}, true},
		{fmt.Errorf("update: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}), true},
		{fmt.Errorf("%w: %w", errors.New("10164"), jetstream.ErrKeyRevisionMismatch), true},
		{jetstream.ErrKeyExists, true},
		{&jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNotFound}, false},
		{errors.New("timeout"), false},
	} {
		if got := isWrongRevision(c.err); got != c.want {
			t.Errorf("isWrongRevision(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
