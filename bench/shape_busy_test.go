package bench

import (
	"context"
	"strings"
	"testing"
)

// TestBusyBusShape: the busy bus shape measures the quiet bus and each bus
// named, with every round of both verbs, finds the consumer declared by
// metadata in the point, and reports a row for each bus.
func TestBusyBusShape(t *testing.T) {
	buses := []BusyBus{{40, 1}, {5, 4}}
	res, err := Run(context.Background(), Config{Size: 4 << 20, Rounds: 2, SmallRounds: 3, BusyBuses: buses,
		Shapes: []string{ShapeBusy}, Work: t.TempDir(), Command: "go test ./bench -run TestBusyBusShape"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Shapes) != 1 || res.Shapes[0].Failed != "" {
		t.Fatalf("shapes measured: %+v", res.Shapes)
	}
	tiers := res.Shapes[0].Busy
	if len(tiers) != 3 || tiers[1].Streams != 40 || tiers[2].Consumers != 4 {
		t.Fatalf("busy tiers: %+v", tiers)
	}
	for i, tier := range tiers {
		if len(tier.Snapshot) != busyRounds || len(tier.DryRun) != busyRounds || tier.RSS <= 0 || (i > 0 && !tier.Declared) {
			t.Errorf("busy tier %d: %+v", i, tier)
		}
	}
	md := res.Markdown()
	for _, want := range []string{"#### Busy bus", "| none (quiet bus) |", "| 40 × 1 = 40 consumers |", "| 5 × 4 = 20 consumers |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
