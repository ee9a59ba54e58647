package busarchive

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ErrIndexOver is an Indexer's error when the index would be over its
// bounds (MaxKeyIndexMessages, MaxKeyIndexChunks, MaxKeyIndexSize): none
// is built, and the caller reads the archive whole instead.
var ErrIndexOver = errors.New("the key index would be over its bounds")

// Indexer builds the key index of one stream archive from its bytes, as
// they are written: Write copies them into a bounded queue (indexQueueSize)
// that a goroutine of its own decodes, so the writer waits only when the
// decoder falls that far behind. keep chooses, by subject, the messages
// recorded. Write never fails: an index that cannot be built (over its
// bounds, or bytes that do not decode) says so from Index, and from then on
// the bytes written are dropped without waiting.
//
// Call Close once the archive is written whole, then Index; or Stop to give
// the index up. The Indexer is used by one writer.
type Indexer struct {
	q    *indexQueue
	done chan struct{}
	ix   *KeyIndex
	err  error
}

// NewIndexer starts the key index of stream's archive.
func NewIndexer(stream string, keep func(subject string) KeepMode) *Indexer {
	x := &Indexer{q: newIndexQueue(indexQueueSize), done: make(chan struct{})}
	go func() {
		defer close(x.done)
		b := &indexBuild{ix: &KeyIndex{Stream: stream}, keep: keep, last: map[string]int{}}
		x.ix, x.err = b.run(x.q)
		x.q.stop() // the rest is not queued
	}()
	return x
}

// Write queues a copy of p for the decoder.
func (x *Indexer) Write(p []byte) (int, error) {
	x.q.put(p)
	return len(p), nil
}

// Close says the archive was written whole.
func (x *Indexer) Close() error {
	x.q.close()
	return nil
}

// Index waits for the decoder, after Close, and returns the index; its
// error wraps ErrIndexOver when the index was over its bounds.
func (x *Indexer) Index() (*KeyIndex, error) {
	<-x.done
	if x.err != nil {
		return nil, fmt.Errorf("the key index of stream %s was not built: %w", x.ix.Stream, x.err)
	}
	return x.ix, nil
}

// Stop gives the index up and waits for the decoder to end.
func (x *Indexer) Stop() {
	x.q.stop()
	x.q.close()
	<-x.done
}

// indexBuild is one Indexer's decoding: the archive's entries read from
// its decoded bytes, counted, so that each entry's offset is known.
type indexBuild struct {
	ix    *KeyIndex
	keep  func(string) KeepMode
	last  map[string]int // KeepLast subject: its message's index in ix.Messages
	size  int64          // the index's encoded size so far, about
	r     *bufio.Reader
	pos   int64 // decoded bytes consumed
	frame *indexFrames
}

// run decodes the archive read from src and returns its index.
func (b *indexBuild) run(src io.Reader) (*KeyIndex, error) {
	b.frame = &indexFrames{r: src}
	b.r = bufio.NewReaderSize(b.frame, 64<<10)
	if err := b.entries(); err != nil {
		return b.ix, err
	}
	if err := b.frame.drain(); err != nil {
		return b.ix, err
	}
	b.ix.Size, b.ix.Plain, b.ix.Chunks = b.frame.off, b.frame.plain, b.frame.chunks
	slices.SortFunc(b.ix.Messages, func(x, y IndexedMessage) int { return cmp.Compare(x.Seq, y.Seq) })
	return b.ix, nil
}
