package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// The data shapes a run can measure (issue 18). ShapeRandom is the run of
// issue 6 (a stream of random payloads and a KV bucket, with the store
// backends); each other shape runs on a nats-server and a file keeper of its
// own, started for it and removed after it, so that no shape's data weighs
// on another's figures.
const (
	ShapeRandom       = "random"         // 1 KiB random payloads in one stream, and a KV bucket (the figures above)
	ShapeCompressible = "compressible"   // one stream of highly compressible messages
	ShapeModule       = "module"         // a KV bucket, an object store and a stream: a quarter, a quarter and a half of the bytes
	ShapeRollback     = "rollback"       // restore-kept with the kept data live against backup + rm + restore by hand
	ShapeDelta        = "delta"          // restore-kept method auto (delta) after 1 MiB appended, against backup + rm + restore by hand
	ShapeNonPrefix    = "nonprefix"      // restore-kept method auto (full) after a message of the point deleted, against method full
	ShapeDiff         = "diff"           // diff-kept of a stream after 1 MiB appended, against its target
	ShapeLogical      = "logical"        // restore-kept method logical of a KV bucket after 100 keys rewritten, against backup + rm + restore by hand
	ShapePoints       = "points"         // many points over as many kept data
	ShapeConsumers    = "consumers"      // many durable consumers of one module
	ShapeBigKV        = "bigkv"          // one KV bucket of many keys
	ShapeBusy         = "busybus"        // a small KV among thousands of other modules' streams with consumers
	ShapeCapture      = "capture"        // a captured stream: incremental point, restore to a moment, lag, writers' cost, store bytes
	ShapeCaptureZip   = "capture-zip"    // the capture shape with compressible payloads
	ShapeCaptureMod   = "capture-module" // the capture shape on a KV bucket, an object store and a stream
)

// AllShapes are every shape, in the order a run measures them.
func AllShapes() []string {
	return []string{ShapeRandom, ShapeCompressible, ShapeModule, ShapeRollback, ShapeDelta, ShapeNonPrefix, ShapeDiff, ShapeLogical,
		ShapePoints, ShapeConsumers, ShapeBigKV, ShapeBusy, ShapeCapture, ShapeCaptureZip, ShapeCaptureMod}
}

// ParseShapes reads a comma-separated list of shapes such as random,module.
func ParseShapes(s string) ([]string, error) {
	out := commaList(s)
	return out, checkShapes(out)
}

// commaList is the non-empty fields of a comma-separated list, trimmed.
func commaList(s string) []string {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

func checkShapes(shapes []string) error {
	if len(shapes) == 0 {
		return fmt.Errorf("no shape named (any of %s), so nothing was run", strings.Join(AllShapes(), ","))
	}
	for i, s := range shapes {
		switch {
		case !slices.Contains(AllShapes(), s):
			return fmt.Errorf("shape %q is not one of %s, so nothing was run", s, strings.Join(AllShapes(), ","))
		case slices.Contains(shapes[:i], s):
			return fmt.Errorf("shape %q is named twice, so nothing was run", s)
		}
	}
	return nil
}

// hasShape reports whether the run measures shape.
func (c Config) hasShape(shape string) bool { return slices.Contains(c.Shapes, shape) }

// ShapeRow is one comparison of a shape: the keeper's samples against the
// nats CLI's, taken in alternating pairs, and, for a restore, the server's
// own restore of the same streams (no client-side work) taken in the same
// rounds.
type ShapeRow struct {
	Op     string   // what the keeper did, as the report shows it
	CLI    string   // what the nats CLI did; empty when there is no CLI side
	Pairs  Pairs    // Pairs.Nats empty when there is no CLI side
	Server []Sample // the server's own restore, when measured
	Target float64  // keeper ÷ nats (or ÷ Versus) at most, 0 for none
	// Versus, when set, names the other side of the row when it is not
	// the nats CLI (the keeper's own full rollback of the same data):
	// Pairs.Nats are its samples, taken in the same rounds.
	Versus string
	// TargetWall, when set, is the target of the keeper's median wall time
	// of a verb with no other side (reported against the target).
	TargetWall time.Duration
	// Took is how long the keeper's replies said the verb took, where
	// they say it (diff-kept).
	Took []time.Duration
}

// ShapeResult is one shape's figures.
type ShapeResult struct {
	Shape   string
	Data    string // what was made, in a sentence
	Rows    []ShapeRow
	Notes   []string // further facts: archive sizes, checks done
	Points  []PointsTier
	Busy    []BusyTier
	Capture *CaptureFigures // the capture shape's figures that are not timed verbs
	Took    time.Duration
	Load    string  // load average as the shape began
	Failed  string  // why the shape stopped part-way; its figures so far stay
	Bytes   float64 // stored bytes of the kept data's streams, for the rates
}

// measureShapes runs every shape of the run but random, each on its own
// server and keeper.
func (r *run) measureShapes(ctx context.Context) error {
	for _, name := range r.cfg.Shapes {
		if name == ShapeRandom {
			continue
		}
		sr := &ShapeResult{Shape: name, Load: loadAverage()}
		start := time.Now()
		r.cfg.Log.Info("shape", "name", name)
		err := r.runShape(ctx, name, sr)
		sr.Took = time.Since(start)
		r.res.Shapes = append(r.res.Shapes, *sr)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// The figures so far are reported with why the shape stopped;
			// the other shapes still run.
			r.res.Shapes[len(r.res.Shapes)-1].Failed = err.Error()
			r.cfg.Log.Warn("a shape failed; its figures so far are reported", "shape", name, "err", err)
		}
	}
	return nil
}

// runShape starts a server and a file keeper for one shape, measures it,
// and stops and removes them.
func (r *run) runShape(ctx context.Context, name string, sr *ShapeResult) error {
	s, err := r.subRun(ctx, name)
	if s != nil {
		defer func() {
			s.close()
			if !r.cfg.Keep {
				os.RemoveAll(s.work)
			}
		}()
	}
	if err != nil {
		return err
	}
	measure, ok := map[string]func(*run, context.Context, *ShapeResult) error{
		ShapeCompressible: (*run).shapeCompressible,
		ShapeModule:       (*run).shapeModule,
		ShapeRollback:     (*run).shapeRollback,
		ShapeDelta:        (*run).shapeDelta,
		ShapeNonPrefix:    (*run).shapeNonPrefix,
		ShapeDiff:         (*run).shapeDiff,
		ShapeLogical:      (*run).shapeLogical,
		ShapePoints:       (*run).shapePoints,
		ShapeConsumers:    (*run).shapeConsumers,
		ShapeBigKV:        (*run).shapeBigKV,
		ShapeBusy:         (*run).shapeBusy,
		ShapeCapture:      (*run).shapeCapture,
		ShapeCaptureZip:   (*run).shapeCaptureZip,
		ShapeCaptureMod:   (*run).shapeCaptureModule,
	}[name]
	if !ok {
		return fmt.Errorf("no such shape %q", name)
	}
	if err := measure(s, ctx, sr); err != nil {
		return fmt.Errorf("%w; the server's log:\n%s", err, s.server.tail())
	}
	return nil
}

// subRun is a run of its own for one shape, in a directory of the parent
// run's: its own nats-server and file keeper (the binary the parent built),
// the parent's nats CLI and profiler.
func (r *run) subRun(ctx context.Context, name string) (*run, error) {
	work := filepath.Join(r.work, "shape-"+name)
	for _, d := range []string{"store", "keeper", "nats-backup"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o700); err != nil {
			return nil, err
		}
	}
	s := &run{cfg: r.cfg, work: work, env: r.env, nats: r.nats, prof: r.prof, res: &Result{Config: r.cfg}}
	// The parent removes the directory (unless -keep, when the shape's
	// keeper's log is left in it too), and its own keeper's log is the one
	// written beside the profiles; the profiler (s.prof) is the parent's.
	s.cfg.Perf = ""
	serverBin, err := tools.NatsServerPath(ctx)
	if err != nil {
		return nil, fmt.Errorf("install nats-server: %w", err)
	}
	if err := s.startServer(ctx, serverBin); err != nil {
		return s, err
	}
	k, err := s.startKeeper(ctx, filepath.Join(r.work, "nats-keeper"), keeperSpec{store: StoreFile})
	if err != nil {
		return s, err
	}
	s.res.PeakExact = resetPeakRSS(k.proc.pid()) == nil
	return s, nil
}

// backupDir is where the nats CLI backs up stream in this run.
func (r *run) backupDir(stream string) string { return filepath.Join(r.work, "nats-backup", stream) }

// cliBackup is `nats backup stream` of each of streams, one after the other,
// timed as one sample.
func (r *run) cliBackup(ctx context.Context, name string, streams []string) (Sample, error) {
	return r.natsOp(ctx, name, streams, func(s string) []string {
		os.RemoveAll(r.backupDir(s))
		return []string{"backup", "stream", s, r.backupDir(s), "--no-progress"}
	})
}

// cliRestore is `nats backup restore stream` of each of streams' backups.
// The CLI waits --timeout for each chunk's acknowledgement, 5 s by default,
// which a loaded machine passes while the server creates a stream's many
// consumers (the consumers shape); a minute changes no speed. A refused
// restore is tried again (natsRestoreOp).
func (r *run) cliRestore(ctx context.Context, name string, streams []string) (Sample, error) {
	return r.natsRestoreOp(ctx, name, streams, func(s string) []string {
		return []string{"--timeout", cliTimeout, "backup", "restore", "stream", r.backupDir(s), "--no-progress"}
	})
}

// cliTimeout is the nats CLI's --timeout in the shapes' restores.
const cliTimeout = "1m"

// cliCommands are the nats CLI commands of a backup and a restore of
// streams, as the report shows them.
func cliCommands(streams []string) (backup, restore string) {
	var b, rs []string
	for _, s := range streams {
		b = append(b, fmt.Sprintf("nats backup stream %s DIR/%s --no-progress", s, s))
		rs = append(rs, fmt.Sprintf("nats --timeout %s backup restore stream DIR/%s --no-progress", cliTimeout, s))
	}
	return strings.Join(b, " && "), strings.Join(rs, " && ")
}

// dirBytes is the bytes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// Bounds of the shapes' settings.
const (
	maxPoints    = 100_000
	maxConsumers = 100_000
	// maxBusyConsumers bounds the other modules' consumers of one busy bus.
	maxBusyConsumers = 200_000
)

// shapeDefaults fills and checks the shapes' settings. A run without the
// random shape measures no store backend (they are measured on its data).
func (c *Config) shapeDefaults() error {
	if c.Shapes == nil {
		c.Shapes = AllShapes()
		if c.Cluster {
			c.Shapes = []string{ShapeRandom}
		}
	}
	if c.Points == nil {
		c.Points = []int{100, 1_000, 10_000}
	}
	if c.Consumers == 0 {
		c.Consumers = 2_000
	}
	if c.BigKVKeys == 0 {
		c.BigKVKeys = 200_000
	}
	if c.BusyBuses == nil {
		c.BusyBuses = DefaultBusyBuses()
	}
	if err := checkShapes(c.Shapes); err != nil {
		return err
	}
	switch {
	case c.Cluster && (len(c.Shapes) != 1 || c.Shapes[0] != ShapeRandom):
		return fmt.Errorf("the cluster comparison measures the random shape only, not %s, so nothing was run", strings.Join(c.Shapes, ","))
	case c.Consumers < 1 || c.Consumers > maxConsumers:
		return fmt.Errorf("consumers %d is outside 1 to %d, so nothing was run", c.Consumers, maxConsumers)
	case c.BigKVKeys < 1 || c.BigKVKeys > maxKVKeys:
		return fmt.Errorf("big KV keys %d is outside 1 to %d, so nothing was run", c.BigKVKeys, maxKVKeys)
	}
	for _, bus := range c.BusyBuses {
		if bus.Streams < 1 || bus.Consumers < 1 || bus.Streams*bus.Consumers > maxBusyConsumers {
			return fmt.Errorf("busy bus %+v needs a stream or more, a consumer or more on each, and at most %d consumers in all, so nothing was run", bus, maxBusyConsumers)
		}
	}
	for i, n := range c.Points {
		if n < 1 || n > maxPoints || (i > 0 && n <= c.Points[i-1]) {
			return fmt.Errorf("points tiers %v must grow, each 1 to %d, so nothing was run", c.Points, maxPoints)
		}
	}
	if len(c.Points) == 0 {
		return errors.New("no points tier named, so nothing was run")
	}
	if !c.hasShape(ShapeRandom) {
		c.Stores = []string{StoreFile}
	}
	return nil
}

// ParseInts reads a comma-separated list of counts such as 100,1000,10000.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range commaList(s) {
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}
