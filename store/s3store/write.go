package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/nats-keeper/nats-keeper/store"
)

// abortTimeout bounds the cleanup of an upload given up.
const abortTimeout = 30 * time.Second

// Create begins a new object at key; nothing is visible until Commit.
func (s *Store) Create(ctx context.Context, key string) (store.Writer, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	return store.NewPartWriter(ctx, key, &sink{s: s, key: key, full: s.full(key)}), nil
}

// sink uploads one object's parts. An object of one short part (or none) is
// kept until Complete and put with one PutObject; any other begins a
// multipart upload at its first part.
type sink struct {
	s         *Store
	key, full string

	mu       sync.Mutex
	uploadID string
	parts    []types.CompletedPart
	small    []byte   // the only part, when shorter than store.PartSize
	smallSum [32]byte // its SHA-256, as the writer hashed it
	hasSmall bool
	heldID   string           // names this writer's kept parts under heldDir
	held     map[int]heldPart // parts kept for ReadPart, until Part has them
}

func b64(sum []byte) string { return base64.StdEncoding.EncodeToString(sum) }

// Part stores part n: the only part of a short object is copied and kept
// for Complete; any other is uploaded with its SHA-256, which the server
// checks.
func (k *sink) Part(ctx context.Context, n int, data store.Blocks, sum [32]byte) error {
	size := data.Len()
	if n == 1 && size < store.PartSize {
		k.mu.Lock()
		k.small, k.smallSum, k.hasSmall = data.Bytes(), sum, true
		k.mu.Unlock()
		return nil
	}
	id, err := k.upload(ctx)
	if err != nil {
		return err
	}
	body := newGuard(data)
	out, err := k.s.c.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:         aws.String(k.s.bucket),
		Key:            aws.String(k.full),
		UploadId:       aws.String(id),
		PartNumber:     aws.Int32(int32(n)),
		Body:           body,
		ContentLength:  aws.Int64(int64(size)),
		ChecksumSHA256: aws.String(b64(sum[:])),
	}, unsignedPayload())
	body.close()
	if err != nil {
		return k.s.failWrite(err, "uploading part %d (%d bytes) of %s failed, so the part was not stored", n, size, k.key)
	}
	k.mu.Lock()
	k.parts = append(k.parts, types.CompletedPart{PartNumber: aws.Int32(int32(n)), ETag: out.ETag, ChecksumSHA256: aws.String(b64(sum[:]))})
	_, kept := k.held[n]
	k.mu.Unlock()
	if kept {
		k.dropHeld(ctx, n)
	}
	return nil
}

// upload begins the multipart upload once and returns its id.
func (k *sink) upload(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.uploadID != "" {
		return k.uploadID, nil
	}
	out, err := k.s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(k.s.bucket),
		Key:               aws.String(k.full),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return "", k.s.failWrite(err, "beginning the multipart upload of %s failed, so nothing was stored", k.key)
	}
	k.uploadID = aws.ToString(out.UploadId)
	return k.uploadID, nil
}

// Complete makes the object visible: one PutObject for a short object, or
// CompleteMultipartUpload of every part, whose composite checksum the server
// reports and Complete compares with sum.
func (k *sink) Complete(ctx context.Context, count int, size int64, sum string) (store.Info, error) {
	k.dropHeld(ctx) // none are left once every Part came
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.uploadID == "" {
		if count > 1 || int64(len(k.small)) != size || (count == 1) != k.hasSmall {
			return store.Info{}, fmt.Errorf("completing %s: %d parts of %d bytes were announced but %d bytes were handed over (a bug in the writer), so nothing was stored", k.key, count, size, len(k.small))
		}
		whole := k.smallSum
		if !k.hasSmall {
			whole = sha256.Sum256(nil)
		}
		_, err := k.s.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket:         aws.String(k.s.bucket),
			Key:            aws.String(k.full),
			Body:           bytes.NewReader(k.small),
			ContentLength:  aws.Int64(size),
			ChecksumSHA256: aws.String(b64(whole[:])),
			Metadata:       map[string]string{sumMeta: sum},
		}, unsignedPayload())
		k.small = nil
		if err != nil {
			return store.Info{}, k.s.failWrite(err, "putting %s (%d bytes) failed, so it was not stored", k.key, size)
		}
		return k.s.written(ctx, k.key, size, sum)
	}
	if len(k.parts) != count {
		return store.Info{}, fmt.Errorf("completing %s: %d parts were announced but %d uploaded (a bug in the writer), so it was not completed", k.key, count, len(k.parts))
	}
	slices.SortFunc(k.parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	out, err := k.s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(k.s.bucket),
		Key:             aws.String(k.full),
		UploadId:        aws.String(k.uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: k.parts},
	})
	if err != nil {
		// The server may have completed it and lost the answer: an object
		// there whole, with this Sum, is this one (or the same bytes).
		if info, _, herr := k.s.head(ctx, k.key); herr == nil && info.Size == size && info.Sum == sum {
			k.s.log.Warn("completing an S3 upload failed, but the object is there whole; taken as committed", "key", k.key, "err", err)
			k.uploadID = "" // any leftover is Sweep's
			return info, nil
		}
		return store.Info{}, k.s.failWrite(err, "completing the multipart upload of %s (%d parts) failed, so it was not made visible", k.key, count)
	}
	k.uploadID = "" // completed: nothing left to abort
	if got := compositeSum(aws.ToString(out.ChecksumSHA256), count); got != "" && got != sum {
		k.s.Delete(context.WithoutCancel(ctx), k.key)
		return store.Info{}, fmt.Errorf("the server's checksum of %s (%s) differs from the one written (%s), so the object was deleted", k.key, got, sum)
	}
	return k.s.written(ctx, k.key, size, sum)
}

// Abort aborts the multipart upload, if one began, and removes the parts
// kept for a hold.
func (k *sink) Abort(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	k.dropHeld(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.small = nil
	if k.uploadID == "" {
		return
	}
	_, err := k.s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(k.s.bucket),
		Key:      aws.String(k.full),
		UploadId: aws.String(k.uploadID),
	})
	if err != nil {
		k.s.log.Warn("aborting an S3 upload failed; Sweep will abort it later", "key", k.key, "upload", k.uploadID, "err", err)
		return
	}
	k.uploadID = ""
}

// compositeSum is the Sum a composite SHA-256 ("base64-N") of N parts
// tells, or "" when checksum is not one of count parts.
func compositeSum(checksum string, count int) string {
	b, n, ok := cutChecksum(checksum)
	if !ok || n != count {
		return ""
	}
	return hex.EncodeToString(b)
}

// cutChecksum splits "base64" or "base64-N" into the raw SHA-256 and N (0
// for a full-object checksum).
func cutChecksum(checksum string) ([]byte, int, bool) {
	enc, parts, composite := strings.Cut(checksum, "-") // base64 has no '-'
	n := 0
	if composite {
		var err error
		if n, err = strconv.Atoi(parts); err != nil || n < 1 {
			return nil, 0, false
		}
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(b) != sha256.Size {
		return nil, 0, false
	}
	return b, n, true
}

// unsignedPayload signs a request whose body carries its own SHA-256
// (x-amz-checksum-sha256, a signed header, which the server checks against
// the body) as UNSIGNED-PAYLOAD: the signature still binds that checksum, so
// a changed body is refused all the same, and neither the SDK nor the server
// hashes the body a second time for the signature (the server's second
// SHA-256 pass was an eighth of a snapshot's CPU on versitygw).
func unsignedPayload() func(*s3.Options) {
	return s3.WithAPIOptions(func(st *middleware.Stack) error {
		return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("KeeperUnsignedPayload",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return next.HandleFinalize(v4.SetPayloadHash(ctx, "UNSIGNED-PAYLOAD"), in)
			}), (*v4.ComputePayloadSHA256)(nil).ID(), middleware.Before)
	})
}

// guard is a part's bytes as a request body that reads nothing once closed.
// net/http may go on reading a body after the request returned (when the
// server answered early); the writer reuses the part's blocks after Part
// returns, so Part closes the guard first.
type guard struct {
	mu   sync.Mutex
	r    *store.BlocksReader
	done bool
}

func newGuard(data store.Blocks) *guard { return &guard{r: store.NewBlocksReader(data)} }

func (g *guard) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return 0, errors.New("the part was read after its request ended")
	}
	return g.r.Read(p)
}

func (g *guard) Seek(off int64, whence int) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.Seek(off, whence)
}

func (g *guard) close() {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
}
