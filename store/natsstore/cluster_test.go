package natsstore

import (
	"io"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
)

// TestClusterLeaderChange: on a three-node cluster a bucket of replicas 0
// gets 3, and an object written while the stream leader steps down twice
// commits whole (the parts whose puts failed are put again) and reads back.
func TestClusterLeaderChange(t *testing.T) {
	js, _ := cluster(t)
	open(t, js, "vault", Options{Replicas: 3}) // waits until the cluster takes R3
	s := open(t, js, "auto", Options{Timeout: 5 * time.Second})
	if s.replicas != 3 {
		t.Fatalf("replicas 0 on a cluster of three made %d", s.replicas)
	}
	// An R1 bucket opened again with the default rule is raised to 3; one
	// opened with replicas 1 asked is left at 1.
	open(t, js, "small", Options{Replicas: 1})
	if again := open(t, js, "small", Options{Replicas: 1}); again.replicas != 1 {
		t.Fatalf("an R1 bucket opened with replicas 1 has %d", again.replicas)
	}
	if raised := open(t, js, "small", Options{}); raised.replicas != 3 {
		t.Fatalf("an R1 bucket opened with replicas 0 on a cluster of three has %d, want it raised to 3", raised.replicas)
	}
	ctx := testCtx(t, 5*time.Minute)
	const size = 12*store.PartSize + 3
	w, err := s.Create(ctx, "moved")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	sum := store.NewChecksum()
	src := io.TeeReader(newPattern(11, size), sum)
	start := time.Now()
	for i := range 3 {
		if _, err := io.CopyN(w, src, 3*store.PartSize); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if _, err := js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN.OBJ_auto", nil, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := io.Copy(w, src); err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit(ctx)
	if err != nil || info.Sum != sum.Sum() {
		t.Fatalf("commit across leader changes: %+v, %v", info, err)
	}
	t.Logf("%d MiB written across two leader changes in %v", size>>20, time.Since(start).Round(time.Millisecond))
	o, err := s.Open(ctx, "moved")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := o.Reader(ctx, 0, o.Size())
	got := store.NewChecksum()
	if _, err := io.Copy(got, r); err != nil || got.Sum() != info.Sum {
		t.Fatalf("read back: %v, sum %s want %s", err, got.Sum(), info.Sum)
	}
}
