package keeper_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// benchSize is $name as a positive number, or def: the size knob of a
// benchmark.
func benchSize(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchKeeper is a keeper on tb's bus with a file store of its own,
// logging nowhere.
func benchKeeper(b *testing.B, tb *testbed.Bed) *keeper.Keeper {
	k, err := tb.KeeperOn(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// reportMedian reports the median of took, in milliseconds, as median-ms.
func reportMedian(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, "median-ms")
}
