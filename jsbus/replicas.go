package jsbus

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Error codes of a create or update that asked for more replicas than the
// servers can place.
const (
	codeInsufficient = 10023 // insufficient resources
	codeNoPeers      = 10005 // no suitable peers for placement
	codeNotClustered = 10074 // replicas > 1 not supported in non-clustered mode
)

// autoReplicas is the replicas the keeper's own state asks for when none
// were configured: 3 when the connection reports a cluster, else 1. The
// server's answer decides: where it cannot place 3, 1 is taken (see
// placeReplicas). JetStream tells an ordinary user no cluster's size.
func (a *Adapter) autoReplicas() int {
	if a.nc.ConnectedClusterName() != "" {
		return 3
	}
	return 1
}

// cannotPlace reports whether err is the server saying it cannot place as
// many replicas as were asked for.
func cannotPlace(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && slices.Contains([]jetstream.ErrorCode{codeInsufficient, codeNoPeers, codeNotClustered}, api.ErrorCode)
}

// placeReplicas runs make with the replicas the keeper asks for. With none
// configured, a server that cannot place 3 gets 1, and the log says so;
// configured replicas are never lowered. It returns the replicas made.
func (a *Adapter) placeReplicas(ctx context.Context, what string, make func(ctx context.Context, replicas int) error) (int, error) {
	want := a.cfg.replicas
	if want == 0 {
		want = a.autoReplicas()
	}
	err := a.retry(ctx, "create "+what, func(ctx context.Context) error { return make(ctx, want) })
	if err != nil && a.cfg.replicas == 0 && want > 1 && cannotPlace(err) {
		a.log.Warn("the servers cannot place 3 replicas; making it with 1", "what", what, "err", err)
		want = 1
		err = a.retry(ctx, "create "+what, func(ctx context.Context) error { return make(ctx, want) })
	}
	return want, err
}

// raiseReplicas raises the replicas of the existing stream (the index
// bucket's or the acts stream) to what the keeper asks for, with a stream
// config update, and logs it. A stream with as many or more is left alone.
// With no replicas configured, servers that cannot place 3 leave the stream
// as it is, with a warning; configured replicas that cannot be placed fail
// the start.
func (a *Adapter) raiseReplicas(ctx context.Context, stream string) error {
	want := a.cfg.replicas
	if want == 0 {
		want = a.autoReplicas()
	}
	var info *jetstream.StreamInfo
	err := a.retry(ctx, "look up "+stream, func(ctx context.Context) error {
		s, err := a.js.Stream(ctx, stream)
		if err == nil {
			info = s.CachedInfo()
		}
		return err
	})
	if err != nil {
		return busErr(fmt.Errorf("jsbus: look up %s to check its replicas: %w", stream, err))
	}
	had := info.Config.Replicas
	if had >= want {
		return nil
	}
	cfg := info.Config
	cfg.Replicas = want
	err = a.retry(ctx, "raise the replicas of "+stream, func(ctx context.Context) error {
		_, err := a.js.UpdateStream(ctx, cfg)
		return err
	})
	switch {
	case err == nil:
		a.log.Info("raised the replicas of the keeper's own stream", "stream", stream, "from", had, "to", want)
		return nil
	case a.cfg.replicas == 0 && cannotPlace(err):
		a.log.Warn("the servers cannot place 3 replicas of the keeper's own stream; it keeps its replicas", "stream", stream, "replicas", had, "err", err)
		return nil
	}
	return busErr(fmt.Errorf("jsbus: raise the replicas of %s from %d to %d: %w", stream, had, want, err))
}

// Clustered reports whether the server the connection is on is in a
// cluster (its INFO names one): a server that is not refuses a stream with
// more than one replica.
func (a *Adapter) Clustered() bool { return a.nc.ConnectedClusterName() != "" }
