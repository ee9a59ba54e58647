package spool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/spool"
)

// recomposedStream is one stream of a test archive: n messages of size
// random bytes from seed.
type recomposedStream struct {
	name    string
	n, size int
	seed    uint64
}

// data writes the stream's archive into w; every call writes the same
// bytes (a fixed Stamp, seeded payloads).
func (s recomposedStream) data(w io.Writer) error {
	head := busarchive.ArchiveHead{FirstSeq: 1, LastSeq: uint64(s.n), Msgs: uint64(s.n), Bytes: uint64(s.n * (s.size + 40)),
		Stamp: time.Date(2026, 12, 7, 10, 30, 0, 0, time.UTC).UnixNano()}
	aw, err := busarchive.NewStreamArchiveWriter(w, head)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(s.seed, 1))
	for seq := 1; seq <= s.n; seq++ {
		body := make([]byte, s.size)
		for i := range body {
			body[i] = byte(r.Uint32())
		}
		if err := aw.Message(busarchive.ArchivedMessage{Seq: uint64(seq), Time: head.Stamp + int64(seq), Subject: s.name + ".m", Data: body}); err != nil {
			return err
		}
	}
	return aw.Close()
}

func (s recomposedStream) meta() []byte {
	return fmt.Appendf(nil, `{"config":{"name":%q,"subjects":["%s.>"],"retention":"limits","storage":"file","num_replicas":1},"state":{"messages":%d,"bytes":%d,"first_seq":1,"last_seq":%d,"consumer_count":0}}`,
		s.name, s.name, s.n, s.n*(s.size+40), s.n)
}

// Three streams: one far over the kept edges and over the buffer a
// composition is handed over in, one under one edge, one between.
var recomposedStreams = []recomposedStream{{"BIG", 1600, 1024, 1}, {"TINY", 3, 10, 2}, {"MID", 90, 1024, 3}}

// writeRecomposed writes the test archive into a Recomposed store whose
// compose is compose, and opens it.
func writeRecomposed(t *testing.T, compose func(ctx context.Context, entry int, w io.Writer) error) (*spool.Recomposed, *busarchive.Archive, *busarchive.Manifest) {
	t.Helper()
	ctx := context.Background()
	st := spool.NewRecomposed(compose)
	t.Cleanup(func() { st.Close() })
	sw, err := st.Create(ctx, "points/m/l/f1-x/bus.tar")
	if err != nil {
		t.Fatal(err)
	}
	w := busarchive.NewWriter(sw, busarchive.WriterInfo{KeeperVersion: "test", ServerVersion: "2.15.3"})
	for _, s := range recomposedStreams {
		ws, err := w.Stream(s.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.data(ws.Data()); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Meta().Write(s.meta()); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	info, err := sw.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.DataEntries(); n != len(recomposedStreams) {
		t.Fatalf("%d data entries, want %d", n, len(recomposedStreams))
	}
	o, err := st.Open(ctx, "points/m/l/f1-x/bus.tar")
	if err != nil {
		t.Fatal(err)
	}
	if o.Size() != info.Size {
		t.Fatalf("opened %d bytes, committed %d", o.Size(), info.Size)
	}
	a, err := busarchive.Open(o, o.Size())
	if err != nil {
		t.Fatalf("the scan of the kept bytes failed: %v", err)
	}
	return st, a, m
}

// composeAgain composes entry as written first.
func composeAgain(_ context.Context, entry int, w io.Writer) error {
	return recomposedStreams[entry].data(w)
}

// What is kept and what is composed again read as the archive written:
// Open's scan, a whole verification and each stream's checked data; bytes
// in the middle of a data entry are not kept, and a read of them says so.
func TestRecomposedReadsAsWritten(t *testing.T) {
	st, a, m := writeRecomposed(t, composeAgain)
	rep, err := a.Verify(context.Background())
	if err != nil {
		t.Fatalf("verification: %v", err)
	}
	for i, s := range recomposedStreams {
		if r := rep.Streams[i]; !r.Complete || r.Messages != uint64(s.n) {
			t.Errorf("stream %s: %+v, want complete with %d messages", s.name, r, s.n)
		}
		rc, err := a.CheckedStreamData(context.Background(), s.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		var want bytes.Buffer
		if werr := s.data(&want); err != nil || werr != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("stream %s read %d bytes (%v), want the %d written", s.name, len(got), err, want.Len())
		}
	}
	if len(m.Streams) != len(recomposedStreams) {
		t.Fatalf("manifest of %d streams", len(m.Streams))
	}
	o, err := st.Open(context.Background(), "points/m/l/f1-x/bus.tar")
	if err != nil {
		t.Fatal(err)
	}
	mid := make([]byte, 10)
	if _, err := o.ReadAt(mid, 300<<10); err == nil || !strings.Contains(err.Error(), "composed again only when read from its first byte") {
		t.Errorf("a read in the middle of a data entry: %v, want it refused", err)
	}
}

// A composition that differs from the first, ends short, runs long or
// fails after its last byte fails the read of that stream: the checked read
// never ends as if whole.
func TestRecomposedDifferentCompositionFailsItsRead(t *testing.T) {
	for name, compose := range map[string]func(ctx context.Context, entry int, w io.Writer) error{
		"different bytes": func(_ context.Context, entry int, w io.Writer) error {
			var b bytes.Buffer
			if err := recomposedStreams[entry].data(&b); err != nil {
				return err
			}
			raw := b.Bytes()
			raw[len(raw)/2] ^= 0xff
			_, err := w.Write(raw)
			return err
		},
		"short": func(_ context.Context, entry int, w io.Writer) error {
			var b bytes.Buffer
			if err := recomposedStreams[entry].data(&b); err != nil {
				return err
			}
			_, err := w.Write(b.Bytes()[:b.Len()-1])
			return err
		},
		"long": func(_ context.Context, entry int, w io.Writer) error {
			if err := recomposedStreams[entry].data(w); err != nil {
				return err
			}
			_, err := w.Write([]byte{0})
			return err
		},
		"failed after its last byte": func(_ context.Context, entry int, w io.Writer) error {
			if err := recomposedStreams[entry].data(w); err != nil {
				return err
			}
			return errors.New("the base's checksum did not match")
		},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			_, a, _ := writeRecomposed(t, func(ctx context.Context, entry int, w io.Writer) error {
				calls++
				return compose(ctx, entry, w)
			})
			rc, err := a.CheckedStreamData(context.Background(), "BIG")
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(rc)
			rc.Close()
			if err == nil {
				t.Error("the read of a composition that differs ended whole")
			}
			if calls != 1 {
				t.Errorf("composed %d times, want 1", calls)
			}
		})
	}
}

// A read closed part-way ends its composition: the composer's writes fail
// and Close returns once it has returned.
func TestRecomposedCloseEndsTheComposition(t *testing.T) {
	ended := make(chan error, 1)
	_, a, _ := writeRecomposed(t, func(ctx context.Context, entry int, w io.Writer) error {
		err := recomposedStreams[entry].data(w)
		ended <- err
		return err
	})
	rc, err := a.StreamData("BIG")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the composition ran to its end after its reader was closed")
		}
	default:
		t.Error("Close returned before the composition ended")
	}
}
