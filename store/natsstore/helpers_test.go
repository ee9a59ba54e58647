package natsstore

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/store"
)

func testLog(t testing.TB) *slog.Logger {
	if os.Getenv("NATSSTORE_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// single starts one JetStream server and connects to it.
func single(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, natstest.Start(t, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// cluster starts a three-node JetStream cluster in this process (as
// jsbus/cluster_test.go does) and connects to its first node.
func cluster(t *testing.T) (jetstream.JetStream, []*server.Server) {
	t.Helper()
	srvs := natstest.Cluster(t, "vault", 3)
	js, err := jetstream.New(natstest.Connect(t, srvs[0]))
	if err != nil {
		t.Fatal(err)
	}
	return js, srvs
}

// open opens bucket on js; on a cluster that is still forming the first
// replicated create fails for a while, so it is tried for 30 s.
func open(t testing.TB, js jetstream.JetStream, bucket string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLog(t)
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var s *Store
		s, err = Open(ctx, js, bucket, opts)
		cancel()
		if err == nil {
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
	t.Fatalf("could not open bucket %s: %v", bucket, err)
	return nil
}

// put writes r under key through Create and Commit.
func put(t testing.TB, ctx context.Context, s *Store, key string, r io.Reader) (store.Info, error) {
	t.Helper()
	w, err := s.Create(ctx, key)
	if err != nil {
		return store.Info{}, err
	}
	defer w.Abort()
	if _, err := io.Copy(w, r); err != nil {
		return store.Info{}, err
	}
	return w.Commit(ctx)
}

// names lists every object name in the bucket, parts included.
func names(t *testing.T, s *Store) []string {
	t.Helper()
	infos, err := s.all(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

// pattern is a deterministic, incompressible byte stream (xorshift64*),
// generated as it is read (whatever the sizes of the reads), so a test never
// holds a large object.
type pattern struct {
	state uint64
	word  [8]byte
	have  int // unread bytes at the end of word
	left  int64
}

func newPattern(seed uint64, n int64) *pattern { return &pattern{state: seed | 1, left: n} }

func (p *pattern) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	for i := range b {
		if p.have == 0 {
			p.state ^= p.state >> 12
			p.state ^= p.state << 25
			p.state ^= p.state >> 27
			binary.LittleEndian.PutUint64(p.word[:], p.state*2685821657736338717)
			p.have = 8
		}
		b[i] = p.word[8-p.have]
		p.have--
	}
	p.left -= int64(len(b))
	return len(b), nil
}

// patternBytes is n bytes of the pattern, for small objects.
func patternBytes(seed uint64, n int64) []byte {
	b, _ := io.ReadAll(newPattern(seed, n))
	return b
}
