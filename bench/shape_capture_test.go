package bench

import (
	"context"
	"strings"
	"testing"
)

// TestCaptureShape runs a small capture shape: both timed comparisons
// have their samples, the lag was sampled, the writers were measured both
// ways, and the chain's segments hold at least what the stream gained
// (every message is in them) without being far above it.
func TestCaptureShape(t *testing.T) {
	res, err := Run(context.Background(), Config{Size: 4 << 20, Rounds: 2, SmallRounds: 2, Shapes: []string{ShapeCapture}, Work: t.TempDir(),
		Command: "go test ./bench -run TestCaptureShape"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Shapes) != 1 || res.Shapes[0].Failed != "" {
		t.Fatalf("shapes: %+v", res.Shapes)
	}
	s := res.Shapes[0]
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
	case f.Written <= 0 || f.StoreBytes < f.Written*9/10 || f.StoreBytes > f.Written*2:
		t.Errorf("the chain's segments hold %d bytes for %d bytes written since its base", f.StoreBytes, f.Written)
	}
	md := res.Markdown()
	for _, want := range []string{"#### Capture against its targets", "the capture's lag", "writers' throughput with capture", "`restore-kept` at a moment"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report does not say %q:\n%s", want, md)
		}
	}
}
