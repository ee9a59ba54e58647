package natsstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jsretry"
)

// validBucket is the object store's own rule for bucket names; "OBJ_" and
// the name must fit a stream name (255 bytes).
var validBucket = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,251}$`)

// Open opens the object-store bucket on js as a Store, creating it (file
// storage, opts.Replicas) when it is missing. An existing bucket with fewer
// replicas than asked for is raised (the keeper's rule for its own streams,
// jsretry.Replicas); its direct gets are turned off (see the package
// comment).
func Open(ctx context.Context, js jetstream.JetStream, bucket string, opts Options) (*Store, error) {
	if !validBucket.MatchString(bucket) {
		return nil, fmt.Errorf("%.300q is not an object-store bucket name (1 to 251 letters, digits, - or _), so no store was opened", bucket)
	}
	s := &Store{js: js, bucket: bucket, timeout: opts.Timeout, log: opts.Logger}
	if s.timeout <= 0 {
		s.timeout = 15 * time.Second
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("bucket", bucket)
	s.url = describeURL(js, opts.URL, bucket)
	name := "OBJ_" + bucket
	var info *jetstream.StreamInfo
	err := s.retry(ctx, "look up the bucket", func(ctx context.Context) error {
		st, err := js.Stream(ctx, name)
		if err == nil {
			info = st.CachedInfo()
		}
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if info, err = s.createBucket(ctx, opts.Replicas); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("could not look up the object-store bucket %s, so no store was opened: %w", bucket, busErr(err))
	}
	if info, err = s.adopt(ctx, info, opts.Replicas); err != nil {
		return nil, err
	}
	s.replicas = info.Config.Replicas
	err = s.retry(ctx, "bind the bucket", func(ctx context.Context) error {
		if s.obs, err = js.ObjectStore(ctx, bucket); err != nil {
			return err
		}
		s.stream, err = js.Stream(ctx, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("could not bind the object-store bucket %s, so no store was opened: %w", bucket, busErr(err))
	}
	s.chunk = chunkFor(js.Conn().MaxPayload())
	s.pub, err = jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(max(1, window/s.chunk)),
		jetstream.WithPublishAsyncTimeout(s.timeout))
	if err != nil {
		return nil, fmt.Errorf("could not make a publisher for bucket %s, so no store was opened: %w", bucket, err)
	}
	return s, nil
}

// streamConfig is the object store's own stream for the bucket, with direct
// gets off.
func (s *Store) streamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        "OBJ_" + s.bucket,
		Description: "nats-keeper restore points and set-aside copies",
		Subjects:    []string{"$O." + s.bucket + ".C.>", "$O." + s.bucket + ".M.>"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    -1,
		AllowRollup: true,
		// A chunk sent again within this window (its publish retried in a
		// leader election) is dropped by its Nats-Msg-Id.
		Duplicates: 2 * time.Minute,
	}
}

// replicas is the keeper's rule for the bucket's replicas (jsretry.Replicas):
// 0 asks for 3 on a cluster and takes 1 when the server says it cannot
// place 3.
func (s *Store) replicasRule(configured int) jsretry.Replicas {
	return jsretry.Replicas{Configured: configured, Clustered: s.js.Conn().ConnectedClusterName() != "", Retry: s.policy(s.timeout), Log: s.log}
}

// createBucket makes the bucket with the replicas the rule gives.
func (s *Store) createBucket(ctx context.Context, replicas int) (*jetstream.StreamInfo, error) {
	var info *jetstream.StreamInfo
	want, err := s.replicasRule(replicas).Place(ctx, "the bucket", func(ctx context.Context, r int) error {
		st, err := s.js.CreateStream(ctx, s.streamConfig(r))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // made by another keeper meanwhile
			st, err = s.js.Stream(ctx, "OBJ_"+s.bucket)
		}
		if err == nil {
			info = st.CachedInfo()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("could not create the object-store bucket %s with %d replicas, so no store was opened: %w",
			s.bucket, want, busErr(err))
	}
	s.log.Info("created the object-store bucket", "replicas", info.Config.Replicas)
	return info, nil
}

// adopt checks that an existing stream is an object store and turns its
// direct gets off.
func (s *Store) adopt(ctx context.Context, info *jetstream.StreamInfo, replicas int) (*jetstream.StreamInfo, error) {
	cfg := info.Config
	want := s.streamConfig(cfg.Replicas).Subjects
	if !slices.Contains(cfg.Subjects, want[0]) || !slices.Contains(cfg.Subjects, want[1]) {
		return nil, fmt.Errorf("stream %s exists but does not take the subjects of the object-store bucket %s (%v), so no store was opened",
			cfg.Name, s.bucket, cfg.Subjects)
	}
	info, err := s.replicasRule(replicas).Raise(ctx, s.js, info)
	if err != nil {
		return nil, fmt.Errorf("could not raise the replicas of the object-store bucket %s, so no store was opened: %w", s.bucket, busErr(err))
	}
	cfg = info.Config
	if !cfg.AllowDirect {
		return info, nil
	}
	cfg.AllowDirect = false
	err = s.retry(ctx, "turn direct gets off", func(ctx context.Context) error {
		st, err := s.js.UpdateStream(ctx, cfg)
		if err == nil {
			info = st.CachedInfo()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("could not turn direct gets off on the object-store bucket %s (a follower could answer a read "+
			"with data older than the last commit), so no store was opened: %w", s.bucket, busErr(err))
	}
	s.log.Info("turned direct gets off on the bucket, so the stream leader answers every read")
	return info, nil
}
