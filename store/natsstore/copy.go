package natsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

var _ store.Copier = (*Store)(nil)

// Copy makes dst a copy of src without moving its bytes: a new head under
// dst that names src's parts. Parts are shared from then on, and a replaced
// or deleted head's parts are removed only once no head names them
// (releaseParts). Once dst's head is written, src's head is read again: if it
// no longer names the same parts (src was replaced or deleted meanwhile, so
// its parts may be on their way out), dst's head is removed and Copy fails.
// A plain object (one put into the bucket by other means) is copied through
// the keeper (store.CopyObject).
func (s *Store) Copy(ctx context.Context, src, dst string) (store.Info, error) {
	if err := s.check(dst); err != nil {
		return store.Info{}, err
	}
	var (
		info *jetstream.ObjectInfo
		body []byte
		err  error
	)
	for try := 1; ; try++ {
		if info, err = s.info(ctx, src); err != nil {
			return store.Info{}, fmt.Errorf("copying %s to %s: %w, so nothing was copied", src, dst, err)
		}
		if !isHead(info) {
			return store.CopyObject(ctx, s, src, s, dst)
		}
		body, err = s.headBody(ctx, info)
		if err == nil {
			_, err = decodeHead(info, body)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, errHeadGone) || try == tries {
			return store.Info{}, fmt.Errorf("copying %s to %s: %w, so nothing was copied", src, dst, err)
		}
	}
	upload := info.Metadata[mdUpload]
	md := make(map[string]string, len(info.Metadata))
	for k, v := range info.Metadata {
		md[k] = v
	}
	meta := jetstream.ObjectMeta{Name: dst, Headers: nats.Header{headHeader: []string{headVersion}}, Metadata: md}
	old, err := s.putHead(ctx, meta, body, upload, nil)
	if err != nil {
		return store.Info{}, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	now, err := s.info(ctx, src)
	if err != nil || !isHead(now) || now.Metadata[mdUpload] != upload {
		why := "it was replaced or deleted while it was copied"
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			why = fmt.Sprintf("it could not be read again after the copy (%v)", err)
		}
		cctx, cancel := s.cleanupCtx(ctx)
		defer cancel()
		if derr := s.Delete(cctx, dst); derr != nil {
			return store.Info{}, fmt.Errorf("copying %s to %s: %s, and removing the copy's head failed too (%v), so do not use %s", src, dst, why, derr, dst)
		}
		return store.Info{}, fmt.Errorf("copying %s to %s: %s, so the copy was removed and %s holds nothing", src, dst, why, dst)
	}
	if old != nil && isHead(old) && old.Metadata[mdUpload] != upload {
		s.releaseParts(ctx, dst, old)
	}
	out, err := s.Stat(ctx, dst)
	if err != nil {
		s.log.Warn("the copy's head was put but could not be read back", "key", dst, "err", err)
		out, _ = describe(now)
		out.Key = dst
	}
	return out, nil
}

// putHead puts a head (meta and its body) under meta.Name, replacing what is
// there, and returns what was there before (nil for nothing). A put that
// failed once its meta went out (*tried is set then, if tried is not nil) is
// taken as done when the head found there is upload's.
func (s *Store) putHead(ctx context.Context, meta jetstream.ObjectMeta, body []byte, upload string, tried *bool) (*jetstream.ObjectInfo, error) {
	key := meta.Name
	old, err := s.obs.GetInfo(ctx, key)
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("could not read what %s holds now, so its head was not written: %w", key, busErr(err))
	}
	sent := false
	err = s.retryWithin(ctx, "put the head of "+key, s.partTimeout(), func(ctx context.Context) error {
		_, err := s.putObject(ctx, meta, store.Blocks{body}, nil, &sent, false)
		return err
	})
	if tried != nil {
		// A head the server refused for want of room was not stored and
		// never lands: its parts can go at once.
		*tried = sent && !isFull(err)
	}
	if err != nil && sent && s.headLanded(ctx, key, upload) {
		s.log.Warn("the put of a head failed but the head is there", "key", key, "err", err)
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("could not put the head of %s into bucket %s (if it lands late the object is "+
			"whole; if not, Sweep removes its parts): %w", key, s.bucket, busErr(err))
	}
	return old, nil
}

// headLanded reports whether the head at key is upload's (a put whose
// acknowledgement was lost).
func (s *Store) headLanded(ctx context.Context, key, upload string) bool {
	ctx, cancel := s.cleanupCtx(ctx)
	defer cancel()
	info, err := s.obs.GetInfo(ctx, key)
	return err == nil && isHead(info) && info.Metadata[mdUpload] == upload
}

// releaseParts removes the parts of the head info, which is no longer under
// key, unless another head names them (a Copy shares them), logging what it
// could not remove. Whoever removes or replaces the last head of an upload
// removes its parts; what a crash leaves, Sweep removes.
func (s *Store) releaseParts(ctx context.Context, key string, info *jetstream.ObjectInfo) {
	_, _, upload, count, err := headSummary(info)
	if err != nil {
		s.log.Warn("the parts of a replaced or deleted head are left for Sweep", "key", key, "err", err)
		return
	}
	ctx, cancel := s.cleanupCtx(ctx)
	defer cancel()
	named, err := s.uploadsNamed(ctx)
	if err != nil {
		s.log.Warn("the parts of a replaced or deleted head are left for Sweep: the heads that may share them could not be listed", "key", key, "err", err)
		return
	}
	if named[upload] {
		s.log.Debug("the parts of a replaced or deleted head are kept: another head names them", "key", key, "upload", upload)
		return
	}
	for n := 1; n <= count; n++ {
		if err := s.remove(ctx, partName(upload, n)); err != nil {
			s.log.Warn("could not remove a part of a replaced or deleted object; Sweep will", "key", key, "part", n, "err", err)
		}
	}
}

// uploadsNamed is the set of uploads whose parts some head in the bucket
// names.
func (s *Store) uploadsNamed(ctx context.Context) (map[string]bool, error) {
	infos, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	return namedBy(infos), nil
}

// namedBy is the set of uploads the heads among infos name.
func namedBy(infos []*jetstream.ObjectInfo) map[string]bool {
	named := map[string]bool{}
	for _, info := range infos {
		if isHead(info) {
			named[info.Metadata[mdUpload]] = true
		}
	}
	return named
}
