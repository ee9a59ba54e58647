package keeper

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// A full point of a kept data is at one cut: the keeper's clock is read
// before the first stream's snapshot is asked for, and each snapshot,
// taken after it and so holding every message stored at or before it, is
// written into the archive ended before its first message stamped after it
// (busarchive.CutWriter). Every stream of the point then holds what it held
// at the cut, by its own leader's clock; the point records the cut as At,
// and each stream's manifest what its archive holds (busarchive.StreamCut:
// messages, bytes, first and last sequence, where leaving out began),
// counted as the snapshot passes, with no second pass. A kept data of one
// stream is not cut (but in a module's cut): its snapshot is one moment
// already, and the keeper's clock could leave out a message its leader
// stamped ahead of it. A capture's base is not cut: its chain goes on from
// the base's last sequence.

// cuts is one snapshot's cut: its moment, and what each stream's archive
// holds, from its last snapshot (an archive written again after the bus
// went away takes its streams again).
type cuts struct {
	at  time.Time
	log *slog.Logger
	mu  sync.Mutex
	by  map[string]busarchive.StreamCut
}

func newCuts(at time.Time, log *slog.Logger) *cuts {
	return &cuts{at: at, log: log, by: map[string]busarchive.StreamCut{}}
}

// take is take with each stream's snapshot cut at c.at.
func (c *cuts) take(take streamSource) streamSource {
	return func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		cw := busarchive.NewCutWriter(data, c.at.UnixNano())
		mt := &metaTee{WriteCloser: meta}
		err := take(ctx, stream, &cutData{CutWriter: cw, data: data}, mt)
		if err == nil {
			err = cw.Close() // the bus closed it already when it closes what it is given
		}
		if err != nil {
			return err
		}
		held := cw.Held(busarchive.StoredInMemory(mt.config()))
		if held.From > 0 {
			c.log.Debug("the stream's snapshot holds messages stored after the point's cut, which the point leaves out", "stream", stream, "from", held.From)
		}
		c.mu.Lock()
		c.by[stream] = held
		c.mu.Unlock()
		return nil
	}
}

// record writes what each stream's archive holds into w's manifest, with
// the count of subjects of each stream the key indexes ki index.
func (c *cuts) record(w *busarchive.Writer, ki *keyIndexes) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for stream, held := range c.by {
		if ix := ki.of(stream); ix != nil {
			n := indexedSubjects(ix)
			held.Subjects = &n
		}
		if err := w.SetCut(stream, held); err != nil {
			return err
		}
	}
	return nil
}

// indexedSubjects counts the subjects of a key index's messages: every
// subject of a KV bucket or object store (a key's last message, an
// object's meta and every chunk).
func indexedSubjects(ix *busarchive.KeyIndex) uint64 {
	seen := make(map[string]struct{}, len(ix.Messages))
	for _, m := range ix.Messages {
		seen[m.Subject] = struct{}{}
	}
	return uint64(len(seen))
}

// cutData is a snapshot's data writer through a CutWriter: closing it
// passes on what the CutWriter holds, then closes data.
type cutData struct {
	*busarchive.CutWriter
	data io.WriteCloser
}

func (c *cutData) Close() error {
	return errors.Join(c.CutWriter.Close(), c.data.Close())
}

// metaTee keeps a copy of backup.json as it passes (bounded as the
// archive bounds it), to read the stream's storage.
type metaTee struct {
	io.WriteCloser
	mu  sync.Mutex
	buf bytes.Buffer
}

func (m *metaTee) Write(p []byte) (int, error) {
	m.mu.Lock()
	if m.buf.Len()+len(p) <= busarchive.MaxMetaSize {
		m.buf.Write(p)
	}
	m.mu.Unlock()
	return m.WriteCloser.Write(p)
}

// config is backup.json's configuration as JSON (nil when it does not
// read).
func (m *metaTee) config() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	cfg, _, err := configOf(m.buf.Bytes())
	if err != nil {
		return nil
	}
	return cfg
}
