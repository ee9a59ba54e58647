package natsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

// maxHead bounds a head body: 100 bytes a part is about 13 TiB of object.
const maxHead = 16 << 20

// Open opens the committed object at key: its head is read now, its parts
// as they are needed.
func (s *Store) Open(ctx context.Context, key string) (store.Object, error) {
	var o *object
	for try := 1; ; try++ {
		info, err := s.info(ctx, key)
		if err != nil {
			return nil, err
		}
		o, err = s.openInfo(ctx, info)
		if err == nil {
			return o, nil
		}
		// The head's chunks vanish when it is replaced or deleted while
		// it is read: read the new meta.
		if !errors.Is(err, errHeadGone) || try == tries {
			return nil, err
		}
	}
}

var errHeadGone = errors.New("the head's chunks are gone")

func (s *Store) openInfo(ctx context.Context, info *jetstream.ObjectInfo) (*object, error) {
	i, err := describe(info)
	if err != nil {
		return nil, err
	}
	o := &object{s: s, info: i}
	o.base, o.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if !isHead(info) { // one part: the whole plain object, checked against its own digest
		sum, err := jetstream.DecodeObjectDigest(info.Digest)
		if err != nil || len(sum) != 32 {
			return nil, fmt.Errorf("%s in bucket %s has no valid digest (%q), so it cannot be read", info.Name, s.bucket, info.Digest)
		}
		o.parts = []part{{name: info.Name, size: i.Size}}
		copy(o.parts[0].sum[:], sum)
		return o, nil
	}
	body, err := s.headBody(ctx, info)
	if err != nil {
		return nil, err
	}
	h, err := decodeHead(info, body)
	if err != nil {
		return nil, err
	}
	for n, p := range h.Parts {
		size := min(store.PartSize, h.Size-int64(n)*store.PartSize)
		pt := part{name: partName(h.Upload, n+1), size: size}
		hex.Decode(pt.sum[:], []byte(p))
		o.parts = append(o.parts, pt)
	}
	return o, nil
}

// headBody reads a head's chunks one by one from the stream leader (a head
// is small), checking its size and digest; errHeadGone when its chunks were
// purged since its meta was read.
func (s *Store) headBody(ctx context.Context, info *jetstream.ObjectInfo) ([]byte, error) {
	if info.Size > maxHead {
		return nil, fmt.Errorf("the head of %s is %d bytes, over %d, so it was not read", info.Name, info.Size, maxHead)
	}
	var body bytes.Buffer
	subj := chunkSubject(s.bucket, info.NUID)
	var seq uint64
	for range info.Chunks {
		var m *jetstream.RawStreamMsg
		err := s.retry(ctx, "read the head of "+info.Name, func(ctx context.Context) (err error) {
			m, err = s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("reading the head of %s: %w", info.Name, errHeadGone)
		}
		if err != nil {
			return nil, fmt.Errorf("could not read the head of %s: %w", info.Name, busErr(err))
		}
		body.Write(m.Data)
		seq = m.Sequence + 1
	}
	sum := sha256.Sum256(body.Bytes())
	if uint64(body.Len()) != info.Size || digestOf(sum) != info.Digest {
		return nil, fmt.Errorf("the head of %s reads as %d bytes with digest %s, not %d bytes with %s, so it cannot be trusted",
			info.Name, body.Len(), digestOf(sum), info.Size, info.Digest)
	}
	return body.Bytes(), nil
}
