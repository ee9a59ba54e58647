package jsbus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// renamed is backup.json with the stream's name changed to name.
func renamed(t *testing.T, meta []byte, name string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	m["config"].(map[string]any)["name"] = name
	m["config"].(map[string]any)["subjects"] = []any{name + ".>"}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// restoreAgain restores stream name from data and meta as the keeper's
// restore does (restore_streams.go): when the server still held files of a
// stream of that name removed just before (10062, ErrStaleStream), what
// the restore made is removed and it is begun again, up to 5 times.
func restoreAgain(ctx context.Context, b *bus, name string, data, meta []byte) error {
	for try := 1; ; try++ {
		err := b.a.Restore(ctx, name, bytes.NewReader(data), bytes.NewReader(meta))
		if err == nil || !errors.Is(err, keeper.ErrStaleStream) || try == 5 {
			return err
		}
		if err := b.a.DeleteStream(ctx, name); err != nil && !errors.Is(err, keeper.ErrNoStream) {
			return err
		}
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
}

// Many restores at once on a server of its own, with streams being removed
// beside them, on an account of many streams: nats-server 2.15.3's restore
// walks the account's streams without its lock when it begins, so starts
// that overlap a stream's creation or removal can end the server's process.
func TestManyRestoresAtOnceOnAServerOfItsOwn(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	for i := range 300 {
		name := fmt.Sprintf("other%03d", i)
		if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, MaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "src", Subjects: []string{"src.>"}, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := b.js.Publish(ctx, fmt.Sprintf("src.%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	data, meta := snapshot(t, b.a, "src")
	const at, rounds = 12, 20
	var wg sync.WaitGroup
	errs := make([]error, at)
	for i := range at {
		name := fmt.Sprintf("r%02d", i)
		m := renamed(t, meta, name)
		wg.Go(func() {
			for round := range rounds {
				if err := restoreAgain(ctx, b, name, data, m); err != nil {
					errs[i] = fmt.Errorf("round %d: restore %s: %w", round, name, err)
					return
				}
				if err := b.a.DeleteStream(ctx, name); err != nil {
					errs[i] = fmt.Errorf("round %d: delete %s: %w", round, name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// Restores beside another went over connections of their own, each
	// closed when its restore ended.
	lanes := func(state server.ConnState) int {
		cz, err := b.srv.Connz(&server.ConnzOptions{State: state, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range cz.Conns {
			if strings.HasSuffix(c.Name, "(restore lane)") {
				n++
			}
		}
		return n
	}
	// The server learns of a closed connection a moment after the client
	// closed it.
	open, closed := 0, 0
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		open, closed = lanes(server.ConnOpen), lanes(server.ConnClosed)
		if open == 0 && closed > 0 || time.Now().After(deadline) {
			break
		}
	}
	if closed == 0 {
		t.Error("no restore went over a connection of its own")
	}
	if open != 0 {
		t.Errorf("%d restore connections are still open 5 s after every restore ended", open)
	}
}

// blockAfter gives the first after bytes of r, then waits for release.
type blockAfter struct {
	r       io.Reader
	after   int
	given   int
	reached chan struct{}
	release chan struct{}
}

func (b *blockAfter) Read(p []byte) (int, error) {
	if b.given >= b.after {
		close(b.reached)
		<-b.release
		b.after = math.MaxInt
	}
	p = p[:min(len(p), b.after-b.given)]
	n, err := b.r.Read(p)
	b.given += n
	return n, err
}

// The start of a restore is taken one at a time only until the server has
// added its stream: a restore begins, and ends, beside one that waits for
// the rest of its data.
func TestARestoreBeginsBesideOneWaitingForItsData(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	payload := make([]byte, 10<<10)
	for _, s := range []struct {
		name string
		msgs int
	}{{"big", 600}, {"small", 3}} {
		if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: s.name, Subjects: []string{s.name + ".>"}}); err != nil {
			t.Fatal(err)
		}
		for i := range s.msgs {
			rand.Read(payload)
			if _, err := b.js.Publish(ctx, fmt.Sprintf("%s.%d", s.name, i), payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	bigData, bigMeta := snapshot(t, b.a, "big")
	smallData, smallMeta := snapshot(t, b.a, "small")
	for _, s := range []string{"big", "small"} {
		if err := b.a.DeleteStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Past the snapshot's first s2 block, which holds the state the
	// server adds the stream from.
	slow := &blockAfter{r: bytes.NewReader(bigData), after: 2 << 20, reached: make(chan struct{}), release: make(chan struct{})}
	bigDone := make(chan error, 1)
	go func() { bigDone <- b.a.Restore(ctx, "big", slow, bytes.NewReader(bigMeta)) }()
	<-slow.reached
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second) // under the server's 5 s stall timer of the big one
	err := b.a.Restore(sctx, "small", bytes.NewReader(smallData), bytes.NewReader(smallMeta))
	cancel()
	close(slow.release)
	if err != nil {
		t.Errorf("a restore beside one waiting for its data: %v", err)
	}
	if err := <-bigDone; err != nil {
		t.Errorf("the restore that waited for its data: %v", err)
	}
}
