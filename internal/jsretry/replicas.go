package jsretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Error codes of a create or update that asked for more replicas than the
// servers can place.
const (
	CodeInsufficient = 10023 // insufficient resources
	CodeNoPeers      = 10005 // no suitable peers for placement
	CodeNotClustered = 10074 // replicas > 1 not supported in non-clustered mode
)

// CannotPlace reports whether err is the server saying it cannot place as
// many replicas as were asked for.
func CannotPlace(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && slices.Contains([]jetstream.ErrorCode{CodeInsufficient, CodeNoPeers, CodeNotClustered}, api.ErrorCode)
}

// Replicas is the rule for the replicas of the keeper's own streams (the
// index bucket, the acts stream, the object-store backend's bucket).
// Configured 0 asks for 3 when the connection reports a cluster, else 1;
// the server's answer decides, since JetStream tells an ordinary user no
// cluster's size: where it cannot place 3, 1 is taken, and the log says so.
// Configured replicas are never lowered, and ones that cannot be placed
// fail.
type Replicas struct {
	Configured int  // 0: the default above
	Clustered  bool // the server's INFO names a cluster
	Retry      Policy
	Log        *slog.Logger
}

// Want is the replicas asked for.
func (r Replicas) Want() int {
	switch {
	case r.Configured > 0:
		return r.Configured
	case r.Clustered:
		return 3
	}
	return 1
}

// Place runs make with the replicas asked for, and with 1 when they were
// not configured and the servers cannot place 3. It returns the replicas
// made.
func (r Replicas) Place(ctx context.Context, what string, make func(ctx context.Context, replicas int) error) (int, error) {
	want := r.Want()
	err := r.Retry.Do(ctx, "create "+what, func(ctx context.Context) error { return make(ctx, want) })
	if err != nil && r.Configured == 0 && want > 1 && CannotPlace(err) {
		r.Log.Warn("the servers cannot place 3 replicas; making it with 1", "what", what, "err", err)
		want = 1
		err = r.Retry.Do(ctx, "create "+what, func(ctx context.Context) error { return make(ctx, want) })
	}
	return want, err
}

// Raise raises the replicas of an existing stream to Want with a stream
// config update, and logs it; one with as many or more is left alone.
// With no replicas configured, servers that cannot place 3 leave the
// stream as it is, with a warning. It returns the stream's info as it now
// stands.
func (r Replicas) Raise(ctx context.Context, js jetstream.JetStream, info *jetstream.StreamInfo) (*jetstream.StreamInfo, error) {
	had, want := info.Config.Replicas, r.Want()
	if had >= want {
		return info, nil
	}
	cfg := info.Config
	cfg.Replicas = want
	err := r.Retry.Do(ctx, "raise the replicas of "+cfg.Name, func(ctx context.Context) error {
		s, err := js.UpdateStream(ctx, cfg)
		if err == nil {
			info = s.CachedInfo()
		}
		return err
	})
	switch {
	case err == nil:
		r.Log.Info("raised the replicas of the keeper's own stream", "stream", cfg.Name, "from", had, "to", want)
		return info, nil
	case r.Configured == 0 && CannotPlace(err):
		r.Log.Warn("the servers cannot place 3 replicas of the keeper's own stream; it keeps its replicas", "stream", cfg.Name, "replicas", had, "err", err)
		return info, nil
	}
	return nil, fmt.Errorf("raise the replicas of %s from %d to %d: %w", cfg.Name, had, want, err)
}
