// Package jstest is the setup that nats-keeper's tests share: an embedded
// JetStream server under t.TempDir() on a random loopback port, a
// connection to it and its JetStream handle, each stopped or closed when
// the test ends.
//
// It is for tests only: it imports testing, and only _test.go files import
// it. The embedded server itself comes from internal/natstest.
//
// It may import internal/natstest and keeper (for the acts it reads back),
// never the wiring.
package jstest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// Start starts an embedded JetStream server with opts (nil: natstest's
// defaults, the store under t.TempDir()), connects to it and opens
// JetStream on the connection. A failure fails the test.
func Start(t testing.TB, opts *server.Options) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t, opts)
	nc := natstest.Connect(t, s)
	return s, nc, JetStream(t, nc)
}

// JetStream opens JetStream on nc, or fails the test.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("open JetStream on %s: %v", nc.ConnectedUrlRedacted(), err)
	}
	return js
}

// StoredActs is every act the acts stream holds, in stream order. It
// fails the test on a message that is not an act, or one published with
// another Nats-Msg-Id than the act's id.
func StoredActs(t testing.TB, js jetstream.JetStream, stream string) []keeper.Act {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("the acts stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var acts []keeper.Act
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("act at sequence %d of %s: %v", seq, stream, err)
		}
		var a keeper.Act
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatalf("act at sequence %d of %s: %v", seq, stream, err)
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != a.ID {
			t.Errorf("act %s was published with Nats-Msg-Id %q", a.ID, got)
		}
		acts = append(acts, a)
	}
	return acts
}

// ActIDs is the ids of acts, in order.
func ActIDs(acts []keeper.Act) []string {
	ids := make([]string, len(acts))
	for i, a := range acts {
		ids[i] = a.ID
	}
	return ids
}
