package natsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

// info reads the meta of the object at key; ErrNotFound when there is none.
func (s *Store) info(ctx context.Context, key string) (*jetstream.ObjectInfo, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	var info *jetstream.ObjectInfo
	err := s.retry(ctx, "read the meta of "+key, func(ctx context.Context) (err error) {
		info, err = s.obs.GetInfo(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: bucket %s holds nothing at %s", store.ErrNotFound, s.bucket, key)
	}
	if err != nil {
		return nil, fmt.Errorf("could not read the meta of %s in bucket %s: %w", key, s.bucket, busErr(err))
	}
	return info, nil
}

// describe makes the Info of a head, or of a plain object (one put there by
// other means: its Sum cannot be told).
func describe(info *jetstream.ObjectInfo) (store.Info, error) {
	out := store.Info{Key: info.Name, Size: int64(info.Size), Modified: info.ModTime}
	if !isHead(info) {
		return out, nil
	}
	size, sum, _, _, err := headSummary(info)
	out.Size, out.Sum = size, sum
	return out, err
}

// Stat describes the object at key.
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	info, err := s.info(ctx, key)
	if err != nil {
		return store.Info{}, err
	}
	return describe(info)
}

// all reads the last meta of every name in the bucket, parts included.
//
// The object store's List reads through an ordered consumer, and on a
// cluster that consumer may sit on a replica a little behind the stream's
// leader: it then ends early, with some objects missing (seen on an R3
// bucket under load). A list that misses objects would make Sweep take
// live parts and chunks for leftovers, so every list is checked against
// the leader: the bucket's meta subjects are counted first (stream info,
// answered by the leader), and a list, deleted names included, that holds
// fewer than that is read again, up to listTries times.
func (s *Store) all(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	meta := "$O." + s.bucket + ".M.>"
	for try := 1; ; try++ {
		var infos []*jetstream.ObjectInfo
		var metas int
		err := s.retry(ctx, "list the bucket", func(ctx context.Context) error {
			si, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(meta))
			if err != nil {
				return err
			}
			metas = len(si.State.Subjects)
			infos, err = s.obs.List(ctx, jetstream.ListObjectsShowDeleted())
			if errors.Is(err, jetstream.ErrNoObjectsFound) {
				infos, err = nil, nil
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("could not list bucket %s: %w", s.bucket, busErr(err))
		}
		if len(infos) >= metas {
			return slices.DeleteFunc(infos, func(i *jetstream.ObjectInfo) bool { return i.Deleted }), nil
		}
		if try == listTries {
			return nil, fmt.Errorf("could not list bucket %s: %d reads gave fewer objects than the %d its stream's leader holds (the last %d)", s.bucket, try, metas, len(infos))
		}
		s.log.Debug("a list of the bucket ended early; reading it again", "bucket", s.bucket, "listed", len(infos), "leader", metas, "try", try)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("could not list bucket %s: %w", s.bucket, ctx.Err())
		case <-time.After(time.Duration(try) * 250 * time.Millisecond):
		}
	}
}

// listTries bounds the reads of one list that end early (see all).
const listTries = 8

// List describes every object whose key begins with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Info, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("the store on bucket %s is closed, so nothing was listed", s.bucket)
	}
	if prefix != "" {
		if err := s.check(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, err
		}
	}
	infos, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	out := []store.Info{}
	for _, info := range infos {
		if !strings.HasPrefix(info.Name, prefix) || store.CheckKey(info.Name) != nil {
			continue // parts, and names no key can be
		}
		i, err := describe(info)
		if err != nil {
			return nil, fmt.Errorf("listing bucket %s: %w", s.bucket, err)
		}
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return out, nil
}

// Delete removes the head at key first, so the object is gone at once, then
// its parts; parts it cannot remove are left to Sweep.
func (s *Store) Delete(ctx context.Context, key string) error {
	info, err := s.info(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w, so it was not deleted", err)
	}
	if err := s.purge(ctx, info); err != nil {
		return fmt.Errorf("could not delete %s from bucket %s: %w", key, s.bucket, busErr(err))
	}
	if isHead(info) {
		s.releaseParts(ctx, key, info)
	}
	return nil
}

// remove removes the object called name, if there is one, with no
// tombstone left behind (part names are never used again).
func (s *Store) remove(ctx context.Context, name string) error {
	var info *jetstream.ObjectInfo
	err := s.retry(ctx, "read the meta of "+name, func(ctx context.Context) (err error) {
		info, err = s.obs.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
		return err
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.purge(ctx, info)
}

// purge removes an object's meta message (the object is gone from then on)
// and then its chunks.
func (s *Store) purge(ctx context.Context, info *jetstream.ObjectInfo) error {
	for _, subj := range []string{metaSubject(s.bucket, info.Name), chunkSubject(s.bucket, info.NUID)} {
		err := s.retry(ctx, "purge "+subj, func(ctx context.Context) error {
			return s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj))
		})
		if err != nil {
			return fmt.Errorf("could not purge %s of %s: %w", subj, info.Name, err)
		}
	}
	return nil
}
