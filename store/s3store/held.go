package s3store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nats-keeper/nats-keeper/store"
)

// heldDir is where a sink keeps the part a hold overlaps (an archive's
// stream header, held until the stream's size is known) as an object of its
// own, under the store's prefix: S3 reads no part of an upload in progress,
// and keeping the part in memory instead would hold 8 MiB for a whole
// stream. No store key begins with a dot element here (List leaves heldDir
// out), and Sweep removes what a crash left.
const heldDir = ".keeper-held"

var _ store.PartReader = (*sink)(nil)

// heldPart is a part kept under heldDir.
type heldPart struct {
	key string // store-relative
	sum [32]byte
}

// KeepPart puts part n as an object of its own under heldDir, checked by the
// server against its SHA-256, for ReadPart; Part(n) follows with its final
// bytes, and removes it.
func (k *sink) KeepPart(ctx context.Context, n int, data store.Blocks, sum [32]byte) error {
	k.mu.Lock()
	if k.heldID == "" {
		var b [12]byte
		rand.Read(b[:])
		k.heldID = hex.EncodeToString(b[:])
	}
	key := heldDir + "/" + k.heldID + "/" + strconv.Itoa(n)
	k.mu.Unlock()
	body := newGuard(data)
	_, err := k.s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(k.s.bucket),
		Key:            aws.String(k.s.full(key)),
		Body:           body,
		ContentLength:  aws.Int64(int64(data.Len())),
		ChecksumSHA256: aws.String(b64(sum[:])),
	}, unsignedPayload())
	body.close()
	if err != nil {
		return k.s.failWrite(err, "keeping part %d (%d bytes) of %s as %s failed, so the part was not stored", n, data.Len(), k.key, key)
	}
	k.mu.Lock()
	if k.held == nil {
		k.held = map[int]heldPart{}
	}
	k.held[n] = heldPart{key: key, sum: sum}
	k.mu.Unlock()
	return nil
}

// ReadPart reads back the part KeepPart kept and checks its SHA-256.
func (k *sink) ReadPart(ctx context.Context, n int, into store.Blocks) error {
	k.mu.Lock()
	h, ok := k.held[n]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("part %d of %s was never kept, so it cannot be read back", n, k.key)
	}
	out, err := k.s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(k.s.bucket), Key: aws.String(k.s.full(h.key))})
	if err != nil {
		return k.s.fail(err, "reading part %d of %s back from %s failed", n, k.key, h.key)
	}
	defer out.Body.Close()
	if err := into.Fill(out.Body); err != nil {
		return fmt.Errorf("reading part %d of %s back from %s: %w", n, k.key, h.key, err)
	}
	var one [1]byte
	if m, _ := out.Body.Read(one[:]); m > 0 || into.Sum() != h.sum {
		return fmt.Errorf("part %d of %s reads back from %s with other bytes than were kept", n, k.key, h.key)
	}
	return nil
}

// dropHeld removes the kept copies of the parts ns (all when ns is nil);
// what it cannot remove, Sweep does.
func (k *sink) dropHeld(ctx context.Context, ns ...int) {
	k.mu.Lock()
	var keys []string
	for n, h := range k.held {
		if ns == nil || slices.Contains(ns, n) {
			keys = append(keys, h.key)
			delete(k.held, n)
		}
	}
	k.mu.Unlock()
	for _, key := range keys {
		_, err := k.s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(k.s.bucket), Key: aws.String(k.s.full(key))})
		if err != nil && classify(err) != missing {
			k.s.log.Warn("could not remove a kept part; Sweep will", "key", k.key, "held", key, "err", err)
		}
	}
}

// sweepHeld removes the kept parts under heldDir older than before.
func (s *Store) sweepHeld(ctx context.Context, root string, before time.Time) error {
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(root + heldDir + "/"),
	})
	removed := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.fail(err, "listing the kept parts of %s failed after %d were removed", s.url, removed)
		}
		for _, o := range page.Contents {
			if !aws.ToTime(o.LastModified).Before(before) || !strings.HasPrefix(aws.ToString(o.Key), root+heldDir+"/") {
				continue
			}
			_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: o.Key})
			if err != nil && classify(err) != missing {
				return s.fail(err, "removing the kept part %s failed after %d were removed", aws.ToString(o.Key), removed)
			}
			removed++
		}
	}
	if removed > 0 {
		s.log.Info("removed parts kept by writes that never finished", "store", s.url, "count", removed, "older_than", time.Since(before).Round(time.Second))
	}
	return nil
}
