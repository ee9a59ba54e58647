//go:build restorekill

// CI runs this test as a step of its own in .ci/run, so that no other
// package loads the machine while it times the keeper's start (the issue
// allows that one timed assertion: a keeper killed mid-restore serves
// again within 30 s). Run it with
//
//	go test -tags restorekill -run TestKillMidRestore -v -timeout 30m ./e2e/

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// killEnv is one nats-server, one stream of at least 200 MiB of random
// payloads as the kept data kill/big, and its restore point, shared by
// every round.
type killEnv struct {
	srv       *natsServer
	nc        *nats.Conn
	js        jetstream.JetStream
	dir, home string
	cfg       jetstream.StreamConfig
	point     [4]uint64 // first, last, messages, bytes of the point's stream
	k         *keeperProc
	owner     *testing.T // the test every keeper lives as long as, across rounds
}

const (
	killModule, killLocal = "kill", "big"
	killStream            = killModule + "_" + killLocal
	killPayload           = 8 << 10
)

// TestKillMidRestore kills `nats-keeper serve` (SIGKILL) at 10, 20, 40, 60
// and 80% of a restore-kept of a 200 MiB stream over live data, three
// rounds each, and starts it again at once, while the module writes into
// its stream for 8 s from the kill (the half-restored stream takes writes
// once the server gives the dead keeper's restore up, 5 s after its last
// chunk): it must answer a verb within 30 s, the kept data must end whole
// (the point's or the live data, the other set aside), every write the bus
// acknowledged must be in the recovery aside, and aside/ must hold no
// archive without its aside.json. The restore's progress is the restored
// stream's message count on the bus, against the point's.
func TestKillMidRestore(t *testing.T) {
	e := &killEnv{owner: t}
	tmp := t.TempDir()
	e.dir, e.home = filepath.Join(tmp, "keeper"), tmp
	e.srv = startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	e.nc = connect(t, e.srv.url())
	var err error
	if e.js, err = jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(256)); err != nil {
		t.Fatal(err)
	}
	e.cfg = jetstream.StreamConfig{Name: killStream, Subjects: []string{killModule + "." + killLocal + ".>"}, Storage: jetstream.FileStorage}
	e.fill(t)
	e.k = e.startKeeper(t)
	waitKeepers(t, e.nc, 1, e.k)
	start := time.Now()
	mustCall(t, e.nc, "snapshot-kept", killReq(map[string]any{"form": 1, "fingerprint": "before"}))
	e.point = e.streamState(t)
	t.Logf("restore point of %d messages, %d bytes, taken in %s", e.point[2], e.point[3], time.Since(start).Round(time.Millisecond))
	for _, pct := range []uint64{10, 20, 40, 60, 80} {
		for round := 1; round <= 3; round++ {
			t.Run(fmt.Sprintf("kill at %d%% round %d", pct, round), func(t *testing.T) { e.round(t, pct, round) })
		}
	}
	e.k.p.stop(t, syscall.SIGTERM, 2*time.Minute)
}

// startKeeper runs nats-keeper serve on the env's dir, owned by the whole
// test: the keeper started again in one round serves the next.
func (e *killEnv) startKeeper(t *testing.T) *keeperProc {
	t.Helper()
	cmd := exec.Command(keeperBin, "serve", "--server", e.srv.url(), "--dir", e.dir, "--log-format", "json")
	cmd.Env = cleanEnv(e.home)
	return &keeperProc{url: e.srv.url(), dir: e.dir, home: e.home, p: startProc(t, e.owner, cmd)}
}

func killReq(extra map[string]any) map[string]any {
	r := map[string]any{"module": killModule, "local": killLocal, "caller": "e2e"}
	for k, v := range extra {
		r[k] = v
	}
	return r
}

// fill makes the stream and publishes random 64 KiB payloads until it
// holds at least 200 MiB.
func (e *killEnv) fill(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, e.cfg); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewChaCha8([32]byte{'k', 'i', 'l', 'l'}))
	n := (200<<20)/killPayload + 1
	for i := range n {
		data := make([]byte, killPayload)
		for j := 0; j < len(data); j += 8 {
			v := r.Uint64()
			for b := range 8 {
				data[j+b] = byte(v >> (8 * b))
			}
		}
		if _, err := e.js.PublishAsync(fmt.Sprintf("%s.%s.p.%d", killModule, killLocal, i%8), data, jetstream.WithStallWait(time.Minute)); err != nil {
			t.Fatalf("async publish %d: %v", i, err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		t.Fatalf("the bus did not acknowledge %d publishes within 5 minutes", n)
	}
}

// streamState is the kept data's stream as the bus holds it.
func (e *killEnv) streamState(t *testing.T) [4]uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), killStream)
	if err != nil {
		t.Fatalf("stream %s: %v", killStream, err)
	}
	st := s.CachedInfo().State
	return [4]uint64{st.FirstSeq, st.LastSeq, st.Msgs, st.Bytes}
}

// live replaces the kept data by a small live stream, as a module that
// moved on would have it, and returns its state and when it was made.
func (e *killEnv) live(t *testing.T, round string) ([4]uint64, time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := e.js.DeleteStream(ctx, killStream); err != nil {
		t.Fatal(err)
	}
	s, err := e.js.CreateStream(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := e.js.Publish(ctx, killModule+"."+killLocal+".live", []byte(fmt.Sprintf("%s live %d", round, i))); err != nil {
			t.Fatal(err)
		}
	}
	return e.streamState(t), s.CachedInfo().Created
}

// round makes the kept data live, runs restore-kept of the point, kills
// the keeper once the restored stream holds pct% of the point's messages,
// starts it again at once and checks the promise.
func (e *killEnv) round(t *testing.T, pct uint64, round int) {
	live, made := e.live(t, fmt.Sprintf("%d%%/%d", pct, round))
	before := asides(t, e.dir)
	body, _ := json.Marshal(killReq(map[string]any{"form": 1, "fingerprint": "before", "why": fmt.Sprintf("kill at %d%%", pct)}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replied := make(chan reply, 1)
	go func() { replied <- call(ctx, e.nc, "restore-kept", body, 10*time.Minute) }()
	at := e.waitProgress(t, made, pct, replied)
	if err := e.k.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.k.p.exited
	cancel()
	<-replied
	wrote := make(chan []uint64, 1)
	go func() { wrote <- e.writeThrough(8 * time.Second) }()

	start := time.Now()
	e.k = e.startKeeper(t)
	took := e.waitServes(t, start)
	t.Logf("killed at %d of %d messages; the keeper answered list-kept %s after it was started again",
		at, e.point[2], took.Round(time.Millisecond))
	writes := <-wrote
	if left := waitNoStale(t, e.js, e.dir, 4*time.Minute); len(left) > 0 {
		t.Fatalf("recovery left these after 4 minutes: %v\n%s", left, longTail(e.k.p.log.String()))
	}
	e.check(t, live, before, writes)
}

// writeThrough is the module writing into its stream through the crash:
// for d, every 25 ms, it publishes, and returns the stream sequences of the
// writes the bus acknowledged. The half-restored stream takes writes once
// the server gave the dead keeper's restore up.
func (e *killEnv) writeThrough(d time.Duration) []uint64 {
	var seqs []uint64
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		ack, err := e.js.Publish(ctx, killModule+"."+killLocal+".after", []byte("written through the crash"))
		cancel()
		if err == nil {
			seqs = append(seqs, ack.Sequence)
		}
	}
	return seqs
}

// withWrites reports whether got is the point's stream with the module's
// writes after it: a write that came after recovery restored the point.
func (e *killEnv) withWrites(got [4]uint64) bool {
	return got[0] == e.point[0] && got[1] > e.point[1] && got[2] == e.point[2]+(got[1]-e.point[1])
}

// waitProgress waits until the stream restored over the live one (made
// after made) holds pct% of the point's messages, and returns how many.
func (e *killEnv) waitProgress(t *testing.T, made time.Time, pct uint64, replied chan reply) uint64 {
	t.Helper()
	want := e.point[2] * pct / 100
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case r := <-replied:
			t.Fatalf("restore-kept answered (%s) before it reached %d%%\n%s", r, pct, tail(e.k.p.log.String()))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := e.js.Stream(ctx, killStream)
		cancel()
		if err == nil && s.CachedInfo().Created.After(made) && s.CachedInfo().State.Msgs >= want {
			return s.CachedInfo().State.Msgs
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the restore did not reach %d%% within 5 minutes\n%s", pct, tail(e.k.p.log.String()))
	return 0
}

// waitServes waits until the keeper started at start answers list-kept,
// within 30 s of start, and returns how long it took.
func (e *killEnv) waitServes(t *testing.T, start time.Time) time.Duration {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"module": killModule})
	for {
		if e.k.p.done() {
			t.Fatalf("nats-keeper serve exited after the kill: %v\n%s", e.k.p.err, tail(e.k.p.log.String()))
		}
		if r := call(context.Background(), e.nc, "list-kept", body, 2*time.Second); r.Err == nil && r.Code == 200 {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the keeper killed mid-restore did not answer list-kept within 30 s of its start\n%s", tail(e.k.p.log.String()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check: the kept data is whole (the point's, with or without the
// module's writes after it, or the live data), the restore's aside holds
// the live data, a recovery aside the point's first messages, every write
// acknowledged (by sequence) is in a recovery aside or live after the
// point, every new aside verifies, and aside/ holds no archive without its
// aside.json. Then the new asides are discarded.
func (e *killEnv) check(t *testing.T, live [4]uint64, before []string, writes []uint64) {
	t.Helper()
	got := e.streamState(t)
	switch {
	case got == e.point:
		t.Logf("the kept data is the point's")
	case e.withWrites(got):
		t.Logf("the kept data is the point's with %d of the module's writes after it", got[1]-e.point[1])
	case got == live:
		t.Logf("the kept data is the live data")
	default:
		t.Errorf("the kept data is %v (first, last, messages, bytes): neither the point's %v nor the live data's %v", got, e.point, live)
	}
	var restoreAsides, fresh []string
	held := uint64(0) // the last sequence a recovery aside holds
	for _, id := range asides(t, e.dir) {
		if contains(before, id) {
			continue
		}
		fresh = append(fresh, id)
		adir := filepath.Join(e.dir, "aside", id)
		verifyArchive(t, adir)
		st := archiveStates(t, filepath.Join(adir, "bus.tar"))[killStream]
		switch r := asideReason(t, e.dir, id); r {
		case "restore":
			restoreAsides = append(restoreAsides, id)
			if st != live {
				t.Errorf("the restore's aside %s holds %v, not the live data %v", id, st, live)
			}
		case "recovery":
			if st[0] != e.point[0] {
				t.Errorf("the recovery aside %s holds %v: not the point's stream %v restored in part", id, st, e.point)
			}
			held = max(held, st[1])
			t.Logf("the recovery aside holds the half-restored stream as it settled, with the module's writes: %d messages, last sequence %d (%d writes acknowledged)",
				st[2], st[1], len(writes))
		default:
			t.Errorf("a new aside %s has reason %q", id, r)
		}
	}
	for _, s := range writes {
		if s > held && !(e.withWrites(got) && s > e.point[1] && s <= got[1]) {
			t.Errorf("the module's write acknowledged as sequence %d is neither in a recovery aside (it holds up to %d) nor live after the point (%v): lost",
				s, held, got)
		}
	}
	if len(restoreAsides) != 1 {
		t.Errorf("want one new aside of reason restore, found %v among %v", restoreAsides, fresh)
	}
	e.noOrphans(t)
	for _, id := range fresh {
		mustCall(t, e.nc, "discard-aside", map[string]any{"from": id, "why": "kill test checked it", "caller": "e2e"})
	}
}

// noOrphans fails for each directory under aside/ that holds an archive
// but no aside.json.
func (e *killEnv) noOrphans(t *testing.T) {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(e.dir, "aside"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range es {
		files, err := os.ReadDir(filepath.Join(e.dir, "aside", d.Name()))
		if err != nil {
			t.Errorf("aside/%s: %v", d.Name(), err)
			continue
		}
		var names []string
		for _, f := range files {
			names = append(names, f.Name())
		}
		has := strings.Join(names, " ")
		if strings.Contains(has, "bus.tar") && !contains(names, "aside.json") {
			t.Errorf("aside/%s holds an archive without its aside.json: %v", d.Name(), names)
		}
	}
}
