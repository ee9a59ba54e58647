package natsstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

var _ store.FreeSpacer = (*Store)(nil)

// JetStream error codes that say a write found no room (nats-server's
// jetstream_errors_generated.go).
const (
	codeAccountResources = 10002 // resource limits exceeded for account
	codeInsufficient     = 10023 // insufficient resources (the server's own max_store)
	codeStorageResources = 10047 // insufficient storage resources available
	codeStoreFailed      = 10077 // storing a message failed: "maximum bytes exceeded" when max_bytes is reached
)

// isFull reports whether err is the server refusing a message for want of
// room: the bucket's max_bytes (with discard new), the account's
// JetStream storage limit, or the server's own.
func isFull(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch int(api.ErrorCode) {
	case codeAccountResources, codeInsufficient, codeStorageResources:
		return true
	case codeStoreFailed:
		return strings.Contains(api.Description, "maximum bytes exceeded")
	}
	return false
}

// FreeSpace is the bytes the bucket may still take: the least of its
// stream's max_bytes less the bytes it holds, and the account's JetStream
// storage limit (its tier's, for the bucket's replicas, when the account
// has tiers) less what the account stores, divided by the replicas (each
// replica's bytes count against the account). math.MaxInt64 when neither
// is limited. The server's own max_store is not told to a client: a write
// that reaches it fails with store.ErrFull.
func (s *Store) FreeSpace(ctx context.Context) (int64, error) {
	var info *jetstream.StreamInfo
	err := s.retry(ctx, "look up the bucket's size", func(ctx context.Context) error {
		var err error
		info, err = s.stream.Info(ctx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("could not look up the size of bucket %s, so its room is unknown: %w", s.bucket, busErr(err))
	}
	free := int64(math.MaxInt64)
	if m := info.Config.MaxBytes; m > 0 {
		free = max(m-int64(info.State.Bytes), 0)
	}
	var acct *jetstream.AccountInfo
	err = s.retry(ctx, "look up the account's limits", func(ctx context.Context) error {
		var err error
		acct, err = s.js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("could not look up the JetStream limits of the account of bucket %s, so its room is unknown: %w", s.bucket, busErr(err))
	}
	r := max(info.Config.Replicas, 1)
	tier := acct.Tier
	if t, ok := acct.Tiers[fmt.Sprintf("R%d", r)]; ok && tier.Limits.MaxStore == 0 {
		tier = t // a tiered account: its limits are per replica count, none at the top
	}
	if l := tier.Limits.MaxStore; l > 0 {
		free = min(free, max(l-int64(tier.Store), 0)/int64(r))
	}
	return free, nil
}
