package bench

import (
	"context"
	"strings"
	"testing"
)

// TestCaptureShape runs small capture shapes, of random and of
// compressible payloads, and of a module's KV bucket, object store and
// stream: both timed comparisons have their samples, the lag
// was sampled, the writers were measured both ways, and the chain's
// segments hold at least what the stream gained (every message is in them)
// without being far above it, or, compressed, less than it.
func TestCaptureShape(t *testing.T) {
	shapes := []string{ShapeCapture, ShapeCaptureZip, ShapeCaptureMod}
	res, err := Run(context.Background(), Config{Size: 4 << 20, Rounds: 2, SmallRounds: 2, Shapes: shapes, Work: t.TempDir(),
		Command: "go test ./bench -run TestCaptureShape"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Shapes) != len(shapes) {
		t.Fatalf("shapes: %+v", res.Shapes)
	}
	for i, s := range res.Shapes {
		if s.Shape != shapes[i] || s.Failed != "" {
			t.Fatalf("shape %d: %+v, want %s measured whole", i, s, shapes[i])
		}
		checkCaptureShape(t, s, s.Shape == ShapeCaptureZip)
	}
	md := res.Markdown()
	for _, want := range []string{"#### Capture against its targets (shape capture)", "#### Capture against its targets (shape capture-zip)",
		"#### Capture against its targets (shape capture-module)",
		"the capture's lag", "writers' throughput with capture", "`restore-kept` at a moment"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report does not say %q:\n%s", want, md)
		}
	}
}

// checkCaptureShape checks one capture shape's figures; compressed, its
// segments hold less than the stream gained.
func checkCaptureShape(t *testing.T, s ShapeResult, compressed bool) {
	t.Helper()
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows, want 2 (restore to a moment, incremental point)", len(s.Rows))
	}
	for _, row := range s.Rows {
		if len(row.Pairs.Keeper) != 2 || len(row.Pairs.Nats) != 2 || row.Versus == "" || row.Target == 0 {
			t.Errorf("%s: %d and %d samples, versus %q, target %v; want 2, 2, a versus and a target", row.Op, len(row.Pairs.Keeper), len(row.Pairs.Nats), row.Versus, row.Target)
		}
	}
	f := s.Capture
	switch {
	case f == nil:
		t.Fatal("no capture figures")
	case len(f.Lags) == 0 || f.Achieved <= 0:
		t.Errorf("the paced writer: %d lag samples, %.0f B/s written", len(f.Lags), f.Achieved)
	case len(f.With) != 2 || len(f.Without) != 2:
		t.Errorf("writers measured %d times with capture and %d without, want 2 and 2", len(f.With), len(f.Without))
	case f.Written <= 0 || f.StoreBytes <= 0 || f.StoreBytes > f.Written*2:
		t.Errorf("%s: the chain's segments hold %d bytes for %d bytes written since its base", s.Shape, f.StoreBytes, f.Written)
	case !compressed && f.StoreBytes < f.Written*9/10:
		t.Errorf("%s: the chain's segments hold %d bytes for %d random bytes written since its base; want at least 0.9 of them", s.Shape, f.StoreBytes, f.Written)
	case compressed && f.StoreBytes >= f.Written:
		t.Errorf("%s: the chain's segments hold %d bytes for %d compressible bytes written since its base; want fewer", s.Shape, f.StoreBytes, f.Written)
	}
}
