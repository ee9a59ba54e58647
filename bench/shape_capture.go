package bench

import (
	"context"
	"fmt"
	"time"

	keptwire "github.com/nats-keeper/nats-keeper/kept"
)

// The capture shape measures issue 41's four targets on one stream of
// cfg.Size random bytes, captured by the shape's keeper with the default
// settings: an incremental point against a full snapshot-kept, a restore
// to a moment against a full restore of a point, the capture's lag under
// a paced writer with the store bytes it wrote, and what capture costs the
// writers. The steps are in shape_capture_ops.go and shape_capture_write.go,
// the report in shape_capture_report.go.

// Targets of issue 41.
const (
	incrementalTarget  = 0.05            // incremental snapshot-kept ÷ full snapshot-kept
	momentTarget       = 1.2             // restore to a moment ÷ full restore of a point
	captureLagTarget   = 2 * time.Second // p99 of the capture's lag at captureRate
	writerCostTarget   = 0.90            // writers' throughput with capture ÷ without, at least
	segmentStoreTarget = 1.1             // the chain's segment bytes ÷ the stream bytes written since its base
	captureRate        = 20e6            // bytes a second the paced writer writes
)

// CaptureFigures are the capture shape's figures that are not timed
// verbs.
type CaptureFigures struct {
	Shape    string          // the shape they are of
	Rate     float64         // what the paced writer asked, bytes a second
	Achieved float64         // what it wrote, bytes a second
	Paced    time.Duration   // how long it wrote
	Lags     []time.Duration // list-kept's lag, sampled while it wrote
	// Writers' throughput (bytes a second) of unpaced runs without and
	// with capture, in pairs.
	Without, With []float64
	// The CPU the keeper and the server used during each of those runs.
	WithoutCPU, WithCPU []WriterCPU
	RunBytes            int64 // what each unpaced run wrote
	// StoreBytes is what the chain's segments hold in the store, Written
	// what the stream's stored bytes grew by since the chain's base.
	StoreBytes, Written int64
}

// WriterCPU is the CPU the keeper and the server used during one unpaced
// writers' run.
type WriterCPU struct{ Keeper, Server time.Duration }

// captureData is a capture shape's kept data: how it is filled and what
// its writers append.
type captureData struct {
	local   string                                            // the kept data bench/<local>
	streams []string                                          // its streams, the one the writers append to first
	fill    func(ctx context.Context, r *run) (string, error) // fills it, and says what it made
	writes  payloadFunc
}

// shapeCapture: one stream of cfg.Size random bytes with a durable
// consumer part-way, the kept data bench/cp.
func (r *run) shapeCapture(ctx context.Context, sr *ShapeResult) error {
	return r.captureShape(ctx, sr, captureData{local: "cp", streams: []string{"bench_cp"},
		fill: streamFill("cp", randomPayload(), "random bytes"), writes: migrationPayload()})
}

// shapeCaptureZip is shapeCapture with compressible payloads, filled and
// written (a JSON-like reading each), the kept data bench/cz: what the
// capture costs when its segments shrink in the store.
func (r *run) shapeCaptureZip(ctx context.Context, sr *ShapeResult) error {
	return r.captureShape(ctx, sr, captureData{local: "cz", streams: []string{"bench_cz"},
		fill: streamFill("cz", compressiblePayload, "compressible bytes (a JSON-like reading each)"), writes: compressiblePayload})
}

// shapeCaptureModule is shapeCapture on a kept data as a module keeps it:
// a KV bucket, an object store and a stream (the module shape's), the
// writers appending to the stream; the kept data bench/cm.
func (r *run) shapeCaptureModule(ctx context.Context, sr *ShapeResult) error {
	return r.captureShape(ctx, sr, captureData{local: "cm", streams: []string{"bench_cm", "KV_bench_cm", "OBJ_bench_cm"},
		fill: func(ctx context.Context, r *run) (string, error) { return r.fillModule(ctx, "cm") }, writes: migrationPayload()})
}

// streamFill fills the kept data bench/<local>'s one stream with cfg.Size
// bytes of pay, its durable consumer part-way.
func streamFill(local string, pay payloadFunc, what string) func(context.Context, *run) (string, error) {
	return func(ctx context.Context, r *run) (string, error) {
		stream := "bench_" + local
		msgs, floor, err := r.readStream(ctx, stream, "bench."+local, pay)
		return fmt.Sprintf("kept data `bench/%s` = stream `%s`, %d messages of %d %s, durable consumer `%s_reader` at ack floor %d",
			local, stream, msgs, r.cfg.MsgSize, what, stream, floor), err
	}
}

// captureShape measures the capture targets on d's kept data.
func (r *run) captureShape(ctx context.Context, sr *ShapeResult, d captureData) error {
	made, err := d.fill(ctx, r)
	if err != nil {
		return err
	}
	k := kept{module: module, local: d.local, streams: d.streams}
	c := &captureRun{r: r, sr: sr, k: k, prefix: "bench." + d.local, pay: d.writes, fig: &CaptureFigures{Rate: captureRate, Shape: sr.Shape}}
	sr.Capture = c.fig
	sr.Data = made + ", captured with the default settings (a segment each second or 8 MiB)"
	full, err := c.fullPoints(ctx)
	if err != nil {
		return err
	}
	if err := c.turn(ctx, "on"); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{
		func(ctx context.Context) error { return c.momentRounds(ctx, full) },
		func(ctx context.Context) error { return c.incrementalRounds(ctx, full) },
		c.pacedWrite,
		c.writerRuns,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// captureRun is the state of one capture shape's run.
type captureRun struct {
	r      *run
	sr     *ShapeResult
	k      kept
	prefix string
	pay    payloadFunc
	fig    *CaptureFigures
	// baseBytes is the stream's stored bytes when the chain the paced
	// writer measures began.
	baseBytes int64
}

// turn turns capture of the kept data on or off; on, it waits until the
// capture's window reaches past now (its base taken).
func (c *captureRun) turn(ctx context.Context, onOff string) error {
	q := keeperRequest(c.k.module, c.k.local, 0, "")
	q.Capture, q.Why = onOff, "benchmark"
	if _, err := c.r.file().client.CaptureKept(ctx, q); err != nil {
		return fmt.Errorf("capture-kept %s of %s/%s: %w", onOff, c.k.module, c.k.local, err)
	}
	if onOff == "off" {
		return nil
	}
	return c.caughtUp(ctx, time.Now())
}

// captureOf is list-kept's capture of the kept data.
func (c *captureRun) captureOf(ctx context.Context) (*keptwire.CaptureInfo, error) {
	q := keeperRequest(c.k.module, "", 0, "")
	rep, err := c.r.file().client.ListKept(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list-kept of %s: %w", c.k.module, err)
	}
	for i, ci := range rep.Captures {
		if ci.Local == c.k.local {
			return &rep.Captures[i], nil
		}
	}
	return nil, fmt.Errorf("list-kept of %s shows no capture of %s", c.k.module, c.k.local)
}

// caughtUp waits until the capture's window reaches t: every message
// stored before t is in a committed segment (or the base). It looks every
// 200 ms (list-kept reads the chain's segment records), for at most 5
// minutes (a new base of a big kept data is a full snapshot).
func (c *captureRun) caughtUp(ctx context.Context, t time.Time) error {
	var last error
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		ci, err := c.captureOf(ctx)
		if last = err; err == nil && ci.To != nil && !ci.To.Before(t) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the capture of %s/%s did not reach %s in 5 minutes (the last look: %v)", c.k.module, c.k.local, t.Format(time.RFC3339Nano), last)
}
