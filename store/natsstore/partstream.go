package natsstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/nats-io/nats.go/jetstream"
)

// readAhead bounds the bytes of one part's chunks the client holds before
// they are read: a pull consumer asks for at most this many bytes' worth of
// chunks at a time (at least two chunks), so a slow reader (a restore, which
// waits for the bus) never has a whole part waiting in memory, as the object
// store's own Get, a push consumer, lets pile up.
const readAhead = 2 << 20

// partStream reads one part object's chunks through an ordered pull
// consumer of its own and hashes them once as they come; the last chunk is
// handed out only once the part's SHA-256 is the one its head records.
type partStream struct {
	o      *object
	i      int
	cons   string // the consumer's name, removed on Close
	msgs   jetstream.MessagesContext
	ctx    context.Context
	cancel context.CancelFunc
	left   int64  // bytes of the part not yet taken from a chunk
	rest   []byte // what of the last chunk taken is not yet read
	sum    hash.Hash
	err    error
}

// openPart begins reading part i: its meta is read and checked against the
// head, and its chunks begin to flow. ctx bounds the whole read of the part.
func (o *object) openPart(ctx context.Context, i int) (*partStream, error) {
	pt := o.parts[i]
	o.gets.Add(1)
	ctx, cancel := context.WithTimeout(ctx, o.s.partTimeout())
	info, err := o.s.obs.GetInfo(ctx, pt.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		cancel()
		return nil, o.partErr(i, "is missing (the object was replaced or deleted since it was opened, or the part was lost)", nil)
	}
	if err != nil {
		cancel()
		return nil, o.partErr(i, "could not be read", busErr(err))
	}
	if int64(info.Size) != pt.size || info.Digest != digestOf(pt.sum) || info.NUID == "" {
		cancel()
		return nil, o.partErr(i, "is not the one its head names", fmt.Errorf("it holds %d bytes with digest %s, not %d bytes with %s",
			info.Size, info.Digest, pt.size, digestOf(pt.sum)))
	}
	p := &partStream{o: o, i: i, ctx: ctx, cancel: cancel, left: pt.size, sum: sha256.New()}
	if pt.size == 0 {
		return p, nil
	}
	chunk := int(readAhead)
	if info.Opts != nil && info.Opts.ChunkSize > 0 {
		chunk = int(info.Opts.ChunkSize)
	}
	cons, err := o.s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{chunkSubject(o.s.bucket, info.NUID)},
		InactiveThreshold: 2 * o.s.timeout,
	})
	if err == nil {
		p.cons = cons.CachedInfo().Name
		p.msgs, err = cons.Messages(jetstream.PullMaxMessages(max(2, readAhead/chunk)))
	}
	if err != nil {
		p.Close()
		return nil, o.partErr(i, "could not be read", busErr(err))
	}
	return p, nil
}

// Read hands out the part's bytes; io.EOF once all were read and checked.
func (p *partStream) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	for len(p.rest) == 0 {
		if p.left == 0 {
			return 0, io.EOF
		}
		if p.err = p.take(); p.err != nil {
			return 0, p.err
		}
	}
	n := copy(b, p.rest)
	p.rest = p.rest[n:]
	return n, nil
}

// take takes the next chunk, hashes it, and checks the part's SHA-256 once
// the last one came.
func (p *partStream) take() error {
	m, err := p.msgs.Next(jetstream.NextContext(p.ctx))
	if err != nil {
		if p.ctx.Err() != nil {
			err = fmt.Errorf("%w (no chunk within the part's %v)", p.ctx.Err(), p.o.s.partTimeout())
		}
		return p.o.partErr(p.i, "could not be read", busErr(err))
	}
	data := m.Data()
	if int64(len(data)) > p.left {
		return p.o.partErr(p.i, "is damaged: it holds more bytes than its head records", nil)
	}
	p.sum.Write(data)
	p.left -= int64(len(data))
	if p.left == 0 && [32]byte(p.sum.Sum(nil)) != p.o.parts[p.i].sum {
		return p.o.partErr(p.i, "is damaged: its bytes do not have the SHA-256 its head records", nil)
	}
	p.rest = data
	return nil
}

// Close stops the consumer and removes it in the background (the server
// would after InactiveThreshold anyway).
func (p *partStream) Close() error {
	if p.msgs != nil {
		p.msgs.Stop()
		p.msgs = nil
	}
	p.cancel()
	if p.cons != "" {
		name, s := p.cons, p.o.s
		p.cons = ""
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
			defer cancel()
			s.stream.DeleteConsumer(ctx, name)
		}()
	}
	if p.err == nil {
		p.err = errors.New("the part's read was closed")
	}
	return nil
}

// nextPart is a part whose read was begun ahead of need, in the background.
type nextPart struct {
	i    int
	done chan struct{}
	p    *partStream
	err  error
}

// openAhead begins opening part i in the background.
func (o *object) openAhead(ctx context.Context, i int) *nextPart {
	n := &nextPart{i: i, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		n.p, n.err = o.openPart(ctx, i)
	}()
	return n
}

// wait is the part once opened.
func (n *nextPart) wait() (*partStream, error) {
	<-n.done
	return n.p, n.err
}

// drop closes the part, once opened, without reading it.
func (n *nextPart) drop() {
	go func() {
		if p, err := n.wait(); err == nil {
			p.Close()
		}
	}()
}
