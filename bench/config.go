// Package bench measures nats-keeper against the nats CLI's own backup and
// restore, as issue 6 asks: it starts a real nats-server and a real
// `nats-keeper serve` as processes on 127.0.0.1, fills a kept data with
// realistic data, and times the keeper's verbs and the nats CLI's commands in
// alternating pairs. Run writes the figures as Markdown (BENCHMARKS.md).
//
// Nothing here asserts a time: the figures are reported, never checked.
//
// It is wiring for the benchmark: it may import keeper, jsbus, verbs and
// internal/tools; only cmd/keeper-bench and its own tests import it.
package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Config is what one benchmark run does.
type Config struct {
	Size        int64 // bytes of message payload in the kept data's stream (default 1 GiB)
	MsgSize     int   // payload bytes of one message (default 1 KiB)
	Subjects    int   // distinct subjects the messages are spread over (default 500,000, at most one per message)
	KVKeys      int   // keys in the kept data's KV bucket (default 10,000)
	SmallKVKeys int   // keys in the small KV bucket of the round-trip comparison (default 1,000)
	Rounds      int   // alternating pairs of the big comparisons (default 5)
	SmallRounds int   // alternating pairs of the small-KV round trip (default 20)
	// QuickPair is the length under which a shape's snapshot pair is taken
	// SmallRounds times rather than Rounds (default a second).
	QuickPair  time.Duration
	Work       string    // where the run's temporary directory is made (default os.TempDir())
	Keep       bool      // keep the temporary directory (for a look afterwards)
	Command    string    // the command line that started the run, recorded in the report
	Perf       string    // when set, a directory where the first round of each operation is profiled with Linux perf
	KeeperEnv  []string  // extra KEY=VALUE settings of nats-keeper serve's environment only (such as GOMEMLIMIT=40MiB)
	Stores     []string  // store backends to measure, file among them (default DefaultStores: file, nats, s3)
	Cluster    bool      // instead: three nats-server processes in one JetStream cluster, R3 kept data, the big comparisons of the file backend only (issue 13)
	Shapes     []string  // data shapes to measure (default AllShapes; see shape.go)
	Points     []int     // tiers of the points shape (default 100, 1,000, 10,000)
	Consumers  int       // durable consumers of the consumers shape (default 2,000)
	BigKVKeys  int       // keys of the big KV shape (default 200,000)
	BusyBuses  []BusyBus // the busy bus shape's buses after the quiet one (default DefaultBusyBuses)
	StoresOnly bool      // only the store comparisons (each backend against the file backend), none against the nats CLI
	// WrapNatsCLI, when set, is given the installed nats CLI's path and
	// returns the program to run in its place (tests inject failures so).
	WrapNatsCLI func(real string) (string, error)

	Log *slog.Logger // what the run is doing; default discards
}

// replicas is the replicas of the kept data's streams: 3 on the cluster.
func (c Config) replicas() int {
	if c.Cluster {
		return clusterSize
	}
	return 1
}

// Limits of a run's configuration.
const (
	MaxSize    = 64 << 30
	MaxMsgSize = 1 << 20
	MaxRounds  = 1000
	maxKVKeys  = 10_000_000
)

// withDefaults fills the zero fields and checks the bounds.
func (c Config) withDefaults() (Config, error) {
	if c.Size == 0 {
		c.Size = 1 << 30
	}
	if c.MsgSize == 0 {
		c.MsgSize = 1 << 10
	}
	if c.Subjects == 0 {
		c.Subjects = 500_000
	}
	if c.KVKeys == 0 {
		c.KVKeys = 10_000
	}
	if c.SmallKVKeys == 0 {
		c.SmallKVKeys = 1_000
	}
	if c.Rounds == 0 {
		c.Rounds = 5
	}
	if c.SmallRounds == 0 {
		c.SmallRounds = 20
	}
	if c.QuickPair == 0 {
		c.QuickPair = time.Second
	}
	switch {
	case c.Cluster && c.Stores == nil:
		c.Stores = []string{StoreFile}
	case c.Stores == nil:
		c.Stores = DefaultStores()
	case c.Cluster && (len(c.Stores) != 1 || c.Stores[0] != StoreFile):
		return c, fmt.Errorf("the cluster comparison measures the file backend only, not %s, so nothing was run", strings.Join(c.Stores, ","))
	}
	if c.StoresOnly && (c.Cluster || len(c.Stores) < 2) {
		return c, errors.New("only the store comparisons were asked for, but there is none to make (the cluster, or no backend besides file), so nothing was run")
	}
	if c.StoresOnly {
		c.Shapes = []string{ShapeRandom} // the store rows are the random shape's
	}
	if err := c.shapeDefaults(); err != nil {
		return c, err
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case c.Size < 0 || c.Size > MaxSize:
		return c, fmt.Errorf("size %d is outside 1 byte to %d bytes, so nothing was run", c.Size, int64(MaxSize))
	case c.MsgSize < 1 || c.MsgSize > MaxMsgSize:
		return c, fmt.Errorf("message size %d is outside 1 to %d bytes, so nothing was run", c.MsgSize, MaxMsgSize)
	case c.Size < int64(c.MsgSize):
		return c, fmt.Errorf("size %d is smaller than one message of %d bytes, so nothing was run", c.Size, c.MsgSize)
	case c.Subjects < 1 || c.KVKeys < 1 || c.SmallKVKeys < 1 || c.KVKeys > maxKVKeys || c.SmallKVKeys > maxKVKeys:
		return c, errors.New("subjects and KV keys must be at least 1 (and keys at most 10,000,000), so nothing was run")
	case c.Rounds < 1 || c.Rounds > MaxRounds || c.SmallRounds < 1 || c.SmallRounds > MaxRounds:
		return c, fmt.Errorf("rounds must be 1 to %d, so nothing was run", MaxRounds)
	}
	if err := checkStores(c.Stores); err != nil {
		return c, err
	}
	for _, kv := range c.KeeperEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n\x00") {
			return c, fmt.Errorf("keeper environment setting %q is not KEY=VALUE, so nothing was run", kv)
		}
	}
	if n := c.Size / int64(c.MsgSize); int64(c.Subjects) > n {
		c.Subjects = int(n)
	}
	return c, nil
}

// ParseSize reads a size such as 1GiB, 512MiB, 4MB, 1000 or 2g (binary
// units for KiB/MiB/GiB and the one-letter forms, decimal for KB/MB/GB).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
		{"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || !(f > 0 && f*float64(mult) <= MaxSize) || int64(f*float64(mult)) < 1 {
		return 0, fmt.Errorf("size %q is not a positive size of at most 64GiB such as 1GiB, 512MiB or 4MB", s)
	}
	return int64(f * float64(mult)), nil
}
