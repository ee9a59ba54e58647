package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/keeper"
	keptwire "github.com/nats-keeper/nats-keeper/kept"
)

// TestMethodShapes runs a small version of issue 40's shapes on real
// processes: every rollback's reply must give each stream the method its
// shape expects (delta for auto after an append, full for auto after a
// delete, logical), the data must be the point's after every rollback (the
// bench fails the shape otherwise), and diff-kept must count the messages
// appended. It asserts no time, only that every comparison was measured and
// reported.
func TestMethodShapes(t *testing.T) {
	shapes := []string{ShapeDelta, ShapeNonPrefix, ShapeDiff, ShapeLogical}
	res, err := Run(context.Background(), Config{Size: 4 << 20, Rounds: 2, SmallRounds: 2, Shapes: shapes, Work: t.TempDir(),
		Command: "go test ./bench -run TestMethodShapes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Shapes) != len(shapes) {
		t.Fatalf("%d shapes measured, want %d", len(res.Shapes), len(shapes))
	}
	for i, s := range res.Shapes {
		if s.Shape != shapes[i] || s.Failed != "" || len(s.Rows) != 1 {
			t.Errorf("shape %d: %s, %d rows, failed: %q; want %s, 1 row, not failed", i, s.Shape, len(s.Rows), s.Failed, shapes[i])
			continue
		}
		row := s.Rows[0]
		others := 2
		if s.Shape == ShapeDiff {
			others = 0
			if len(row.Took) != 2 || row.TargetWall != diffTarget {
				t.Errorf("diff: took %v, target %v; want 2 durations and %v", row.Took, row.TargetWall, diffTarget)
			}
		}
		if len(row.Pairs.Keeper) != 2 || len(row.Pairs.Nats) != others {
			t.Errorf("%s: %d keeper and %d other samples, want 2 and %d", s.Shape, len(row.Pairs.Keeper), len(row.Pairs.Nats), others)
		}
		for _, x := range append(row.Pairs.Keeper, row.Pairs.Nats...) {
			if x.Wall <= 0 || x.PeakRSS <= 0 {
				t.Errorf("%s: a sample without wall time or peak RSS: %+v", s.Shape, x)
			}
		}
	}
	md := res.Markdown()
	for _, want := range []string{"| delta | `restore-kept` method auto (picks delta) after 0.5 MiB appended |", "| logical | `restore-kept` method logical after 100 of 10000 keys rewritten |",
		"#### Restore methods and diff against the keeper's own or a target", "| nonprefix | `restore-kept` method auto (picks full)", "`restore-kept` method full after the same change",
		"| diff | `diff-kept` after 0.5 MiB appended |", "≤ 1 s, reported against the target", "gave every stream method delta in every round",
		"gave every stream method full in every round", "counted 512 messages appended to `bench_df` and none removed", "nats stream rm -f KV_bench_lg"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "It stopped part-way") {
		t.Errorf("the report says a shape stopped:\n%s", md)
	}
}

// TestRollbackChecks: the checks of issue 40's shapes, on an embedded
// server. checkBack takes a stream whose tail after the point was deleted
// (its last sequence stays past the point's) as the point's, where
// checkSums does not; neither takes a stream with a message of the point
// deleted. checkKeys sees every rewritten and deleted key.
func TestRollbackChecks(t *testing.T) {
	ctx := context.Background()
	nc := natstest.Connect(t, natstest.Start(t, nil))
	r := &run{cfg: Config{Size: 80 * 64, MsgSize: 64, Subjects: 10, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, nc: nc}
	js, err := r.shapeJS()
	if err != nil {
		t.Fatal(err)
	}
	const stream = "t_s"
	if _, err := r.fillStream(ctx, js, stream, "t.s", r.cfg.Size, r.cfg.MsgSize, r.cfg.Subjects, randomPayload()); err != nil {
		t.Fatal(err)
	}
	want, err := r.sumStreams(ctx, []string{stream}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.appendTail(ctx, stream, "t.s", migrationPayload()); err != nil {
		t.Fatal(err)
	}
	if r.tailMsgs() != 10 {
		t.Fatalf("the tail is %d messages, want 10 (an eighth of 80)", r.tailMsgs())
	}
	if err := r.checkBack(ctx, "the test", want, true); err == nil {
		t.Error("checkBack took a stream with 10 messages appended as the point's")
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(81); seq <= 90; seq++ {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.checkBack(ctx, "the test", want, true); err != nil {
		t.Errorf("checkBack refused the point's messages with the tail deleted: %v", err)
	}
	if err := r.checkSums(ctx, "the test", want, true); err == nil || !strings.Contains(err.Error(), "sequences 1–90") {
		t.Errorf("checkSums took a stream whose last sequence is past the point's: %v", err)
	}
	if err := s.DeleteMsg(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := r.checkBack(ctx, "the test", want, true); err == nil {
		t.Error("checkBack took a stream with a message of the point deleted as the point's")
	}
	checkKeysSeeChanges(ctx, t, r, js)
}

func checkKeysSeeChanges(ctx context.Context, t *testing.T, r *run, js *shapeJS) {
	const bucket = "t_kv"
	if err := r.fillKV(ctx, js, bucket, logicalKeys, 8, randomPayload()); err != nil {
		t.Fatal(err)
	}
	keys, err := r.keyDigests(ctx, bucket)
	if err != nil || len(keys) != logicalKeys {
		t.Fatalf("%d keys read (%v), want %d", len(keys), err, logicalKeys)
	}
	if err := r.checkKeys(ctx, "the test", bucket, keys); err != nil {
		t.Fatalf("checkKeys refused the bucket as it was: %v", err)
	}
	if err := r.rewriteKeys(ctx, js, bucket, 8, migrationPayload()); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "key-0000001"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "new", []byte("x")); err != nil {
		t.Fatal(err)
	}
	err = r.checkKeys(ctx, "the test", bucket, keys)
	for _, want := range []string{"100 keys differ (key-0000000, key-0000100,", "1 are gone (key-0000001)", "1 are new (new)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkKeys after 100 keys rewritten, one deleted, one added: %v; want it to say %q", err, want)
		}
	}
}

// TestPickedEach: a rollback's reply must name each kept stream with the
// method the shape expects.
func TestPickedEach(t *testing.T) {
	rep := &keeper.Reply{Said: "restored", Streams: []keptwire.StreamChange{
		{Stream: "a", Method: keptwire.MethodDelta, Why: "delta: the point is a prefix, 16 messages after it"},
		{Stream: "b", Method: keptwire.MethodFull, Why: "full: 1 message of the point was deleted since"},
	}}
	if why, err := pickedEach(rep, []string{"a"}, keptwire.MethodDelta); err != nil || !strings.HasPrefix(why, "delta: the point is a prefix") {
		t.Errorf("stream a: %q, %v; want delta's why", why, err)
	}
	for _, tc := range []struct {
		streams []string
		want    string
	}{
		{[]string{"a", "b"}, `the reply gave stream b method "full" (full: 1 message of the point was deleted since), not delta`},
		{[]string{"c"}, "the reply names no method for stream c (it said: restored)"},
	} {
		if _, err := pickedEach(rep, tc.streams, keptwire.MethodDelta); err == nil || err.Error() != tc.want {
			t.Errorf("streams %v: %v, want %q", tc.streams, err, tc.want)
		}
	}
	diff := &keeper.Reply{Said: "diffed", Streams: []keptwire.StreamChange{{Stream: "a", Appended: 16}}}
	if err := diffCounts(diff, "a", 16); err != nil {
		t.Error(err)
	}
	if err := diffCounts(diff, "a", 17); err == nil {
		t.Error("diffCounts took 16 messages appended for 17")
	}
	if err := diffCounts(diff, "b", 16); err == nil {
		t.Error("diffCounts took a reply without the stream")
	}
	diff.TookMS = 412
	if got := replyTook(diff); got != 412*time.Millisecond {
		t.Errorf("took %v from took-ms 412, want 412ms", got)
	}
}

// TestMethodsMarkdown: the rows against the keeper's own or a target are in
// their own table, met or not by the median, and not in the table against
// the nats CLI.
func TestMethodsMarkdown(t *testing.T) {
	ss := func(ds ...time.Duration) []Sample {
		var out []Sample
		for _, d := range ds {
			out = append(out, Sample{Wall: d})
		}
		return out
	}
	res := &Result{Config: Config{Rounds: 3, Shapes: []string{ShapeDiff, ShapeNonPrefix}}, Shapes: []ShapeResult{
		{Shape: ShapeDiff, Notes: []string{"every reply counted"}, Rows: []ShapeRow{{Op: "`diff-kept` after 1.0 MiB appended", TargetWall: time.Second,
			Pairs: Pairs{Keeper: ss(300*time.Millisecond, 2*time.Second, 400*time.Millisecond)}, Took: []time.Duration{time.Second, time.Second, 0}}}},
		{Shape: ShapeNonPrefix, Rows: []ShapeRow{{Op: "auto", Versus: "full", Target: 1.05,
			Pairs: Pairs{Keeper: ss(11*time.Second, 10*time.Second), Nats: ss(10*time.Second, 10*time.Second)}}}},
	}}
	md := res.Markdown()
	for _, want := range []string{
		"| diff | `diff-kept` after 1.0 MiB appended | 400.0 ms (300.0–2000.0) | 1 s (0–1), to the second | — | — | ≤ 1 s, reported against the target | **yes** |",
		"| nonprefix | auto | 10.50 s (10.00–11.00) | — | full: 10.00 s (10.00–10.00) | 1.05× (1.00–1.10) | ≤ 1.05× | **yes** |",
		"- auto against full\n\n####",
		"Every reply counted.\n\n**nonprefix**",
		"| nonprefix: keeper full | 10.000 s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "| nonprefix | auto |"); n != 1 {
		t.Errorf("the nonprefix row is in the report %d times, want once:\n%s", n, md)
	}
	res.Shapes[1].Rows[0].Pairs.Keeper = ss(11*time.Second, 11*time.Second)
	if md := res.Markdown(); !strings.Contains(md, fmt.Sprintf("| ≤ 1.05× | %s |", yes(false))) {
		t.Errorf("auto 1.10× full is reported as met:\n%s", md)
	}
}
