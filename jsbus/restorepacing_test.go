package jsbus_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
)

// A snapshot with consumers goes to the server with its start (the state and
// the consumers' entries) re-cut into small s2 blocks, in chunks of 4 KiB,
// and the rest in chunks as large as the server takes: the server makes the
// consumers of one small block at a time while its read loop waits. It
// restores the same stream and consumers. A snapshot without consumers goes
// byte for byte as the server wrote it, in large chunks from the first.
func TestRestorePacesTheConsumers(t *testing.T) {
	const small = 4 << 10
	for _, consumers := range []int{0, 300} {
		t.Run(fmt.Sprintf("%d consumers", consumers), func(t *testing.T) {
			ctx := testCtx(t)
			src := newBus(t)
			fillRandom(ctx, t, src.js, 2000, 1<<10)
			for i := range consumers {
				if _, err := src.js.CreateOrUpdateConsumer(ctx, "PIPE", jetstream.ConsumerConfig{
					Durable: fmt.Sprintf("c%03d", i), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := sample.Dump(ctx, src.js, "PIPE")
			if err != nil {
				t.Fatal(err)
			}
			data, meta := snapshot(t, src.a, "PIPE")
			dst := newBus(t)
			sub, err := dst.nc.SubscribeSync("$JS.SNAPSHOT.RESTORE.PIPE.>")
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.a.Restore(ctx, "PIPE", bytes.NewReader(data), bytes.NewReader(meta)); err != nil {
				t.Fatalf("restore: %v", err)
			}
			var sent []byte
			var sizes []int
			for {
				m, err := sub.NextMsg(time.Second)
				if err != nil {
					t.Fatalf("%d bytes seen: %v", len(sent), err)
				}
				if len(m.Data) == 0 { // the end of the data
					break
				}
				sent, sizes = append(sent, m.Data...), append(sizes, len(m.Data))
			}
			large := false
			for i, n := range sizes {
				if n > small {
					large = true
				} else if large && i < len(sizes)-1 {
					t.Fatalf("chunk %d of %d bytes came after a large one (chunks: %v)", i+1, n, sizes)
				}
			}
			if consumers == 0 && (!bytes.Equal(sent, data) || sizes[0] <= small) {
				t.Fatalf("a snapshot without consumers was not sent as it is in large chunks (chunks: %v)", sizes)
			}
			if consumers > 0 && sizes[0] > small {
				t.Fatalf("the first chunk of a snapshot with consumers has %d bytes (chunks: %v)", sizes[0], sizes)
			}
			want, err := io.ReadAll(s2.NewReader(bytes.NewReader(data)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(s2.NewReader(bytes.NewReader(sent)))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("what was sent does not decode to the snapshot (%v)", err)
			}
			after, err := sample.Dump(ctx, dst.js, "PIPE")
			if err != nil {
				t.Fatal(err)
			}
			if d := sample.Diff(before, after); d != "" {
				t.Fatalf("the restored stream differs:\n%s", d)
			}
			info, err := dst.js.Stream(ctx, "PIPE")
			if err != nil {
				t.Fatal(err)
			}
			if n := info.CachedInfo().State.Consumers; n != consumers {
				t.Errorf("%d consumers restored, want %d", n, consumers)
			}
		})
	}
}

// A store that fails halfway through a snapshot with consumers, inside the
// start that is re-cut or after it: the restore fails with the store's
// error, whatever was re-cut.
func TestRestorePacedFailsWithTheReadError(t *testing.T) {
	ctx := testCtx(t)
	src := newBus(t)
	fillRandom(ctx, t, src.js, 2000, 1<<10)
	for i := range 50 {
		if _, err := src.js.CreateOrUpdateConsumer(ctx, "PIPE", jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("c%03d", i), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	data, meta := snapshot(t, src.a, "PIPE")
	errStore := errors.New("the store failed")
	for _, at := range []int{3, 100, len(data) - 100} {
		dst := newBus(t)
		r := io.MultiReader(bytes.NewReader(data[:at]), iotest.ErrReader(errStore))
		err := dst.a.Restore(ctx, "PIPE", r, bytes.NewReader(meta))
		if !errors.Is(err, errStore) {
			t.Errorf("failing after %d of %d bytes: %v, want the store's error", at, len(data), err)
		}
	}
}
