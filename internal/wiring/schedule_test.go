package wiring_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestScheduleMetrics: a serving keeper takes a due point and exports the
// schedule's metrics; a scheduled kept data that is not on the bus counts
// failed, three tries for its due time and no more.
func TestScheduleMetrics(t *testing.T) {
	b := newBed(t, wiring.Setup{ScheduleTick: 50 * time.Millisecond})
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "timed", "data"); err != nil {
		t.Fatal(err)
	}
	p := kept.Policy{KeepLast: 3, Every: "1h", Form: 2}
	for _, kd := range [][2]string{{"timed", "data"}, {"gone", "data"}} {
		if err := b.k.Keeper.SetPolicy(ctx, kd[0], kd[1], p); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`nats_keeper_scheduled_points_total{local="data",module="timed",outcome="taken"} 1`,
		`nats_keeper_scheduled_points_total{local="data",module="gone",outcome="failed"} 3`,
		`nats_keeper_schedule_interval_seconds{local="data",module="timed"} 3600`,
		`nats_keeper_schedule_next_due_timestamp_seconds{local="data",module="timed"}`,
		`nats_keeper_schedule_last_point_timestamp_seconds{local="data",module="gone"} 0`,
		`nats_keeper_schedule_last_point_timestamp_seconds{local="data",module="timed"} 1.`,
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, body := b.get("/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %s:\n%s", missing, grepLines(body, "schedule"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // six more ticks: no fourth try of the same due time
	if _, body := b.get("/metrics"); !strings.Contains(body, `module="gone",outcome="failed"} 3`) {
		t.Fatalf("a failing due point was tried more than three times:\n%s", grepLines(body, "schedule"))
	}
}

func grepLines(s, word string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
