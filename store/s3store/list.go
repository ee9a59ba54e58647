package s3store

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/nats-keeper/nats-keeper/store"
)

// List describes the committed objects whose key begins with prefix, sorted
// by key, from ListObjectsV2 (which shows only completed uploads). Sum is ""
// (S3 lists no checksums); Stat tells it. S3 keys under the store's prefix
// that are not store keys (written by something else) are left out.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Info, error) {
	root := ""
	if s.prefix != "" {
		root = s.prefix + "/"
	}
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(root + prefix),
	})
	var infos []store.Info
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.fail(err, "listing %s%s failed after %d objects, so nothing was listed", s.url, prefix, len(infos))
		}
		for _, o := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(o.Key), root)
			if !ok || store.CheckKey(key) != nil || strings.HasPrefix(key, heldDir+"/") {
				s.log.Debug("an S3 object under the store's prefix is not a store key; not listed", "key", aws.ToString(o.Key))
				continue
			}
			infos = append(infos, store.Info{Key: key, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	slices.SortFunc(infos, func(a, b store.Info) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Delete removes the object at key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.full(key))})
	if err != nil && classify(err) != missing {
		return s.fail(err, "deleting %s failed, so it may still be there", key)
	}
	return nil
}

// Sweep aborts the multipart uploads under the store's prefix that began
// more than age ago (writes that never committed), and removes the parts
// such writes kept under heldDir. Completed objects are never touched.
func (s *Store) Sweep(ctx context.Context, age time.Duration) error {
	root := ""
	if s.prefix != "" {
		root = s.prefix + "/"
	}
	before := time.Now().Add(-age)
	p := s3.NewListMultipartUploadsPaginator(s.c, &s3.ListMultipartUploadsInput{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(root),
	})
	aborted := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.fail(err, "listing the unfinished uploads of %s failed after %d were aborted", s.url, aborted)
		}
		for _, u := range page.Uploads {
			if !aws.ToTime(u.Initiated).Before(before) {
				continue
			}
			_, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: u.Key, UploadId: u.UploadId})
			if err != nil && classify(err) != missing {
				return s.fail(err, "aborting the unfinished upload of %s failed after %d were aborted", aws.ToString(u.Key), aborted)
			}
			aborted++
		}
	}
	if aborted > 0 {
		s.log.Info("aborted unfinished S3 uploads", "store", s.url, "count", aborted, "older_than", age)
	}
	return s.sweepHeld(ctx, root, before)
}

// Copy makes dst a copy of src on the server: one CopyObject up to 5 GiB,
// else a multipart copy (UploadPartCopy). Either is pinned to src's ETag and
// carries src's Sum in dst's metadata.
func (s *Store) Copy(ctx context.Context, src, dst string) (store.Info, error) {
	if err := store.CheckKey(src); err != nil {
		return store.Info{}, err
	}
	if err := store.CheckKey(dst); err != nil {
		return store.Info{}, err
	}
	info, etag, err := s.head(ctx, src)
	if err != nil {
		return store.Info{}, err
	}
	meta := map[string]string{}
	if info.Sum != "" {
		meta[sumMeta] = info.Sum
	}
	source := s.bucket + "/" + escapePath(s.full(src))
	if info.Size <= s.copyLimit {
		_, err = s.c.CopyObject(ctx, &s3.CopyObjectInput{
			Bucket:            aws.String(s.bucket),
			Key:               aws.String(s.full(dst)),
			CopySource:        aws.String(source),
			CopySourceIfMatch: aws.String(etag),
			MetadataDirective: types.MetadataDirectiveReplace,
			Metadata:          meta,
		})
		if err != nil {
			return store.Info{}, s.fail(err, "copying %s to %s on the server failed (or %s changed meanwhile), so %s was not written", src, dst, src, dst)
		}
	} else if err := s.copyParts(ctx, source, etag, dst, info.Size, meta); err != nil {
		return store.Info{}, err
	}
	if info.Sum == "" {
		return s.Stat(ctx, dst)
	}
	return s.written(ctx, dst, info.Size, info.Sum)
}

// copyParts copies size bytes of source to dst with a multipart copy.
func (s *Store) copyParts(ctx context.Context, source, etag, dst string, size int64, meta map[string]string) error {
	k := &sink{s: s, key: dst, full: s.full(dst)}
	up, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(k.full),
		Metadata: meta,
	})
	if err != nil {
		return s.fail(err, "beginning the copy of %s failed, so %s was not written", source, dst)
	}
	k.uploadID = aws.ToString(up.UploadId)
	defer k.Abort(ctx) // does nothing once completed
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < size; off, n = off+s.copyPart, n+1 {
		end := min(off+s.copyPart, size) - 1
		out, err := s.c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket:            aws.String(s.bucket),
			Key:               aws.String(k.full),
			UploadId:          up.UploadId,
			PartNumber:        aws.Int32(n),
			CopySource:        aws.String(source),
			CopySourceIfMatch: aws.String(etag),
			CopySourceRange:   aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
		})
		if err != nil {
			return s.fail(err, "copying bytes %d-%d of %s failed (or it changed meanwhile), so %s was not written", off, end, source, dst)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.CopyPartResult.ETag})
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(k.full),
		UploadId:        up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return s.fail(err, "completing the copy of %s failed, so %s was not written", source, dst)
	}
	k.uploadID = ""
	return nil
}

// escapePath URL-escapes each element of an S3 key, as CopySource needs.
func escapePath(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
