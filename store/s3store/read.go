package s3store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/nats-keeper/nats-keeper/store"
)

const (
	// block is what ReadAt fetches for a short read and keeps, so a scan of
	// 512-byte tar headers does not GET each one.
	block = 1 << 20
	// readTimeout bounds one ReadAt, which has no context of its own.
	readTimeout = 5 * time.Minute
)

// Stat describes the committed object at key.
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Info{}, err
	}
	info, _, err := s.head(ctx, key)
	return info, err
}

// written is the Info of the object just made at key with size bytes and
// Sum sum. It is committed already, so a HeadObject that fails only costs
// the server's Modified (the local clock's is given); a checksum that
// differs means another writer replaced it meanwhile, or a server that
// changed it, and is an error.
func (s *Store) written(ctx context.Context, key string, size int64, sum string) (store.Info, error) {
	info, _, err := s.head(ctx, key)
	if err != nil {
		s.log.Warn("reading what an object is right after it was written failed; its time is the local clock's", "key", key, "err", err)
		return store.Info{Key: key, Size: size, Sum: sum, Modified: time.Now().UTC().Truncate(time.Second)}, nil
	}
	if (info.Sum != "" && info.Sum != sum) || info.Size != size {
		return store.Info{}, fmt.Errorf("%s reads back as %d bytes with checksum %s right after it was written as %d bytes with %s (another writer replaced it, or the server changed it)", key, info.Size, info.Sum, size, sum)
	}
	info.Sum = sum
	return info, nil
}

// head is HeadObject of key: its Info and ETag.
func (s *Store) head(ctx context.Context, key string) (store.Info, string, error) {
	out, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:       aws.String(s.bucket),
		Key:          aws.String(s.full(key)),
		ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return store.Info{}, "", s.fail(err, "reading what %s is failed", key)
	}
	size := aws.ToInt64(out.ContentLength)
	return store.Info{
		Key:      key,
		Size:     size,
		Sum:      sumOf(out.Metadata[sumMeta], aws.ToString(out.ChecksumSHA256), size),
		Modified: aws.ToTime(out.LastModified),
	}, aws.ToString(out.ETag), nil
}

// sumOf is the Sum an object's metadata or SHA-256 checksum tells, or "".
func sumOf(meta, checksum string, size int64) string {
	if b, err := hex.DecodeString(meta); err == nil && len(b) == sha256.Size {
		return strings.ToLower(meta)
	}
	raw, n, ok := cutChecksum(checksum)
	switch {
	case !ok:
		return ""
	case n > 0:
		return compositeSum(checksum, int((size+store.PartSize-1)/store.PartSize))
	case size == 0: // the SHA-256 of nothing, as the Sum of no parts is
		return hex.EncodeToString(raw)
	case size <= store.PartSize:
		return store.CombineSums([][32]byte{[32]byte(raw)})
	}
	return "" // a full-object checksum of several parts tells nothing
}

// Open opens the committed object at key; every read of it is pinned to its
// ETag, so it fails if the object is replaced meanwhile.
func (s *Store) Open(ctx context.Context, key string) (store.Object, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	info, etag, err := s.head(ctx, key)
	if err != nil {
		return nil, err
	}
	return &object{s: s, info: info, etag: etag}, nil
}

type object struct {
	s    *Store
	info store.Info
	etag string

	mu     sync.Mutex
	blk    []byte // the last block fetched
	blkOff int64
}

func (o *object) Size() int64      { return o.info.Size }
func (o *object) Info() store.Info { return o.info }
func (o *object) Close() error {
	o.mu.Lock()
	o.blk = nil
	o.mu.Unlock()
	return nil
}

// ReadAt reads len(p) bytes at off: a short read from the last block
// fetched, or a ranged GET (of a whole block for a short read).
func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("reading %s at %d: a negative offset, so nothing was read", o.info.Key, off)
	}
	if off >= o.info.Size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	want := min(int64(len(p)), o.info.Size-off)
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var n int
	var err error
	if want > block {
		n, err = o.get(ctx, p[:want], off)
	} else {
		n, err = o.cached(ctx, p[:want], off)
	}
	if err == nil && int64(n) < int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

// cached fills p (at most a block) from the kept block, fetching the block
// that begins at off when it does not hold all of p.
func (o *object) cached(ctx context.Context, p []byte, off int64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if off < o.blkOff || off+int64(len(p)) > o.blkOff+int64(len(o.blk)) {
		n := min(block, o.info.Size-off)
		buf := o.blk[:0]
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		o.blk = nil // until it holds the new block
		if _, err := o.get(ctx, buf, off); err != nil {
			return 0, err
		}
		o.blk, o.blkOff = buf, off
	}
	return copy(p, o.blk[off-o.blkOff:]), nil
}

// get fills p with the bytes at off, one ranged GET.
func (o *object) get(ctx context.Context, p []byte, off int64) (int, error) {
	r, err := o.Reader(ctx, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return io.ReadFull(r, p)
}

// Reader streams the n bytes at off with one ranged GET.
func (o *object) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > o.info.Size {
		return nil, fmt.Errorf("reading %d bytes at %d of %s, which has %d: the range is outside the object, so nothing was read", n, off, o.info.Key, o.info.Size)
	}
	if n == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	out, err := o.s.c.GetObject(ctx, &s3.GetObjectInput{
		Bucket:  aws.String(o.s.bucket),
		Key:     aws.String(o.s.full(o.info.Key)),
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
		IfMatch: aws.String(o.etag),
	})
	if err != nil {
		return nil, o.s.fail(err, "reading %d bytes at %d of %s failed (or it was replaced since it was opened), so nothing was read", n, off, o.info.Key)
	}
	return &body{rc: out.Body, left: n, key: o.info.Key}, nil
}

// body is a GET's body that must hold exactly the bytes asked for.
type body struct {
	rc   io.ReadCloser
	left int64
	key  string
}

func (b *body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	switch {
	case err == io.EOF && b.left > 0:
		return n, fmt.Errorf("reading %s: the server's answer ended %d bytes early: %w", b.key, b.left, io.ErrUnexpectedEOF)
	case err == io.EOF:
		return n, nil
	case err != nil:
		return n, fmt.Errorf("reading %s: %w", b.key, err)
	}
	return n, nil
}

func (b *body) Close() error { return b.rc.Close() }
