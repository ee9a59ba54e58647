package jsbus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jsretry"
)

// replicas is the rule for the replicas of the keeper's own state (see
// jsretry.Replicas): --replicas, or 3 on a cluster and 1 where 3 cannot be
// placed.
func (a *Adapter) replicas() jsretry.Replicas {
	return jsretry.Replicas{Configured: a.cfg.replicas, Clustered: a.Clustered(), Retry: a.policy(), Log: a.log}
}

// placeReplicas runs make with the replicas the keeper asks for and returns
// the replicas made.
func (a *Adapter) placeReplicas(ctx context.Context, what string, make func(ctx context.Context, replicas int) error) (int, error) {
	return a.replicas().Place(ctx, what, make)
}

// raiseReplicas raises the replicas of the existing stream (the index
// bucket's or the acts stream) to what the keeper asks for.
func (a *Adapter) raiseReplicas(ctx context.Context, stream string) error {
	var info *jetstream.StreamInfo
	err := a.retry(ctx, "look up "+stream, func(ctx context.Context) error {
		s, err := a.js.Stream(ctx, stream)
		if err == nil {
			info = s.CachedInfo()
		}
		return err
	})
	if err == nil {
		_, err = a.replicas().Raise(ctx, a.js, info)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: check the replicas of %s: %w", stream, err))
	}
	return nil
}

// Clustered reports whether the server the connection is on is in a
// cluster (its INFO names one): a server that is not refuses a stream with
// more than one replica.
func (a *Adapter) Clustered() bool { return a.nc.ConnectedClusterName() != "" }
