package verbs_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// A keeper that dies after it took a point and recorded the act, before
// its reply went out: the client that follows it hears the act and is
// told the point was taken, not that no point was recorded as taken.
func TestClientToldTheSnapshotWasTakenWhenItsKeeperDiedBeforeReplying(t *testing.T) {
	ctx := t.Context()
	srv := natstest.Start(t, nil)
	ncDies, ncClient := natstest.Connect(t, srv), natstest.Connect(t, srv)
	js, err := jetstream.New(ncClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	startKeeper(t, ncDies, t.TempDir(), func(step string) {
		if step == "snapshot-kept:recorded" {
			once.Do(func() {
				_ = ncDies.Flush() // the act is on the server
				ncDies.Close()     // the keeper is gone from the bus: no beats, no PING, no reply
				<-release
			})
		}
	})
	t.Cleanup(func() { close(release) }) // first: the hung verb ends, so its keeper stops
	c := verbs.NewClient(ncClient, verbs.WithTimeout(10*time.Minute), verbs.WithRecoveryWait(20*time.Second))
	r := kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "before", Caller: "test", Why: "before the migration"}
	rep, err := c.SnapshotKept(ctx, r)
	if err != nil {
		t.Fatalf("a snapshot whose keeper died after taking the point: %v", err)
	}
	if rep.Point == nil || rep.Point.Fingerprint != "before" || !strings.Contains(rep.Said, "but it had taken the restore point") {
		t.Fatalf("the reply does not say the point was taken: %+v", rep)
	}
}
