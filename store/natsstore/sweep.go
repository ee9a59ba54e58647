package natsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Sweep removes, when older than age, the parts of uploads that no head
// names (aborted, failed or replaced uploads; a Copy's head names the parts
// of its source's), and the chunks no
// meta names (a put cut off before its meta was written). A write that is
// still going on is younger than age, as long as age exceeds the longest
// write.
func (s *Store) Sweep(ctx context.Context, age time.Duration) error {
	if s.closed.Load() {
		return fmt.Errorf("the store on bucket %s is closed, so nothing was swept", s.bucket)
	}
	infos, err := s.all(ctx)
	if err != nil {
		return fmt.Errorf("%w, so nothing was swept", err)
	}
	cutoff := time.Now().Add(-age)
	named := namedBy(infos)    // uploads some head names
	nuids := map[string]bool{} // chunks some meta names
	type upload struct {
		key    string
		names  []string
		newest time.Time
	}
	uploads := map[string]*upload{}
	for _, info := range infos {
		nuids[info.NUID] = true
		id, _, ok := partOf(info.Name)
		if !ok {
			continue
		}
		u := uploads[id]
		if u == nil {
			u = &upload{key: info.Metadata[mdKey]}
			uploads[id] = u
		}
		u.names = append(u.names, info.Name)
		if info.ModTime.After(u.newest) {
			u.newest = info.ModTime
		}
	}
	var failed []string
	for id, u := range uploads {
		if named[id] || u.newest.After(cutoff) || s.headIs(ctx, u.key, id) {
			continue
		}
		s.log.Info("sweeping the parts of an upload that never committed or was replaced", "key", u.key, "upload", id, "parts", len(u.names))
		for _, name := range u.names {
			if err := s.remove(ctx, name); err != nil {
				failed = append(failed, fmt.Sprintf("%s (%v)", name, err))
			}
		}
	}
	if err := s.sweepChunks(ctx, nuids, cutoff); err != nil {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 {
		return fmt.Errorf("swept bucket %s but could not remove %s; the next Sweep tries again", s.bucket, strings.Join(failed, ", "))
	}
	return nil
}

// headIs reads the head at key again (it may have been committed since the
// list): true when it is upload's, or when it cannot be told.
func (s *Store) headIs(ctx context.Context, key, upload string) bool {
	if key == "" {
		return false
	}
	info, err := s.obs.GetInfo(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false
	}
	return err != nil || (isHead(info) && info.Metadata[mdUpload] == upload)
}

// sweepChunks purges the chunk subjects no meta in nuids names whose last
// chunk is older than cutoff.
func (s *Store) sweepChunks(ctx context.Context, nuids map[string]bool, cutoff time.Time) error {
	prefix := "$O." + s.bucket + ".C."
	var subjects map[string]uint64
	err := s.retry(ctx, "read the chunk subjects", func(ctx context.Context) error {
		si, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
		if err == nil {
			subjects = si.State.Subjects
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("the chunk subjects (%v)", busErr(err))
	}
	var failed []string
	for subj := range subjects {
		if nuids[strings.TrimPrefix(subj, prefix)] {
			continue
		}
		m, err := s.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Time.After(cutoff)) {
			continue
		}
		if err == nil {
			s.log.Info("sweeping chunks no object names", "subject", subj)
			err = s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj))
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", subj, err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("the chunks %s", strings.Join(failed, ", "))
	}
	return nil
}
