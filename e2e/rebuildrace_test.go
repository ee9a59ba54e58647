package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// rebuildRounds is how many times the second keeper starts while the
// first commits points.
const rebuildRounds = 20

// The rebuild race, on the two shared stores a pair of keepers can have:
// keeper 0 serves and takes points, without pause, on two kept data while
// keeper 1 starts (and rebuilds the index from the store), 20 times. A
// point committed between keeper 1's listing of the store and its reading
// of the index was removed from the index ("index rebuilt … removed=1"),
// and a restore of it refused as "no restore point". Now every start
// removes nothing, every committed point's record is in the index after
// it, and the last point of the round restores.
//
// One server is enough: the race is between one keeper's commit and the
// other's rebuild, the order of their requests, not a replica's lag; both
// keepers read the store and the index from the streams' leaders (the
// object store's direct gets are off, the index's gets go to its leader),
// so a cluster adds no interleaving of its own, and one server keeps the
// test to a minute or two.
func TestRebuildRaceNATSStore(t *testing.T) {
	tmp := t.TempDir()
	bus := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "bus"))
	rebuildRace(t, tmp, bus, []string{"--store", bus.url() + "/keeper-ha-points"}, nil)
}

// TestRebuildRaceS3Store is TestRebuildRaceNATSStore with both keepers on
// one S3 store (versitygw).
func TestRebuildRaceS3Store(t *testing.T) {
	tmp := t.TempDir()
	bus := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "bus"))
	s := startS3(t, "keeper-ha")
	rebuildRace(t, tmp, bus, s.args("s3://keeper-ha/points"), s.env())
}

// raceKept are the kept data keeper 0 takes points of during the race:
// two, so two snapshots commit at once.
var raceKept = []string{"ha0", "ha1"}

func rebuildRace(t *testing.T, tmp string, bus *natsServer, args, env []string) {
	nc := connect(t, bus.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range raceKept {
		makeTinyKept(t, js, m, "data")
	}
	k0 := startKeeperArgs(t, bus.url(), filepath.Join(tmp, "keeper0"), tmp, args, env...)
	waitKeepers(t, nc, 1, k0)
	committed := map[string][]string{} // fingerprints by module
	var mu sync.Mutex
	// Points already there make keeper 1's reading of the store take a while.
	for i := range 10 {
		for _, m := range raceKept {
			committed[m] = append(committed[m], takeRacePoint(t, nc, m, fmt.Sprintf("pre%02d", i)))
		}
	}
	dir1 := filepath.Join(tmp, "keeper1")
	for round := range rebuildRounds {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, m := range raceKept {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					fp := fmt.Sprintf("r%02dn%03d", round, i)
					if r := racePoint(nc, m, fp); r.Code == 200 {
						mu.Lock()
						committed[m] = append(committed[m], fp)
						mu.Unlock()
					}
				}
			})
		}
		k1 := startKeeperArgs(t, bus.url(), dir1, tmp, args, env...)
		waitKeepers(t, nc, 2, k0, k1)
		time.Sleep(300 * time.Millisecond) // a few more commits, now to either keeper
		cancel()
		wg.Wait()
		k1.p.stop(t, syscall.SIGTERM, time.Minute)
		if removed := rebuildRemoved(t, k1.p.log.String()); removed != 0 {
			t.Errorf("round %d: keeper 1's rebuild removed %d record(s); every point in the store was committed\n%s",
				round, removed, tail(k1.p.log.String()))
		}
		checkRaceIndex(t, js, committed, round)
		last := committed[raceKept[0]][len(committed[raceKept[0]])-1]
		mustCall(t, nc, "restore-kept", map[string]any{"module": raceKept[0], "local": "data", "form": 1, "fingerprint": last,
			"why": "e2e rebuild race", "caller": "e2e"})
	}
	t.Logf("%d rounds: %d and %d points committed", rebuildRounds, len(committed[raceKept[0]]), len(committed[raceKept[1]]))
}

// makeTinyKept makes a kept data of one small stream, <module>_<local>,
// so a point of it takes a few milliseconds and many commit while the
// other keeper starts.
func makeTinyKept(t *testing.T, js jetstream.JetStream, module, local string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := module + "_" + local
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	for i := range 10 {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.%d", name, i), []byte("kept data")); err != nil {
			t.Fatal(err)
		}
	}
}

func racePoint(nc *nats.Conn, module, fp string) reply {
	body, _ := json.Marshal(map[string]any{"module": module, "local": "data", "form": 1, "fingerprint": fp, "caller": "e2e"})
	return call(context.Background(), nc, "snapshot-kept", body, 2*time.Minute)
}

// takeRacePoint takes a point that must be taken, and returns its
// fingerprint.
func takeRacePoint(t *testing.T, nc *nats.Conn, module, fp string) string {
	t.Helper()
	if r := racePoint(nc, module, fp); r.Code != 200 {
		t.Fatalf("snapshot-kept %s/data %s: %s", module, fp, r)
	}
	return fp
}

// rebuildRemoved is how many records the keeper's start-up rebuild said it
// removed (its JSON log line "index rebuilt from the store"); it fails the
// test when there is no such line.
func rebuildRemoved(t *testing.T, log string) int {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Removed *int   `json:"removed"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, "index rebuilt from the store") && line.Removed != nil {
			return *line.Removed
		}
	}
	t.Fatalf("the keeper never logged its rebuild of the index:\n%s", tail(log))
	return 0
}

// checkRaceIndex fails the test for every committed point whose record is
// not in the index (the kept bucket).
func checkRaceIndex(t *testing.T, js jetstream.JetStream, committed map[string][]string, round int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for k := range keys.Keys() {
		have = append(have, k)
	}
	for m, fps := range committed {
		for _, fp := range fps {
			if key := "point." + m + ".data.1." + fp; !slices.Contains(have, key) {
				t.Errorf("round %d: the index lost %s, a point committed in the store", round, key)
			}
		}
	}
}
