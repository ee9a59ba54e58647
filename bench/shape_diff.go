package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The diff shape (issue 40): diff-kept of a stream of cfg.Size bytes whose
// point was taken before a migration appended tailBytes. It has no CLI side:
// its time is reported against the target.
// diffTarget is the most diff-kept may take, from request to reply.
const diffTarget = time.Second

// shapeDiff: one stream of cfg.Size random bytes with a durable consumer,
// its point (not timed), tailBytes appended (not timed), then diff-kept in
// rounds; each reply must count the messages appended and none removed.
func (r *run) shapeDiff(ctx context.Context, sr *ShapeResult) error {
	const stream, prefix = "bench_df", "bench.df"
	msgs, floor, err := r.readStream(ctx, stream, prefix, randomPayload())
	if err != nil {
		return err
	}
	k := kept{module: module, local: "df", streams: []string{stream}}
	if _, err := r.before(ctx, sr, k); err != nil {
		return err
	}
	if _, _, err := r.keeperVerb(ctx, sr.Shape+"-keeper-point", k, r.file().client.SnapshotKept); err != nil {
		return fmt.Errorf("snapshot-kept of %s/%s, the point to compare with: %w", k.module, k.local, err)
	}
	tail := r.tailSize()
	if err := r.appendTail(ctx, stream, prefix, migrationPayload()); err != nil {
		return err
	}
	sr.Data = fmt.Sprintf("kept data `bench/df` = stream `%s`, %d messages of %d random bytes, durable consumer `bench_df_reader` at ack floor %d; one point taken first, "+
		"then %s appended in %d messages (neither timed); `diff-kept` of that point timed from request to reply (wall) and as its reply says (took); "+
		"no CLI side: the time is reported against the target", stream, msgs, r.cfg.MsgSize, floor, mib(float64(tail)), r.tailMsgs())
	sr.Rows = append(sr.Rows, ShapeRow{Op: fmt.Sprintf("`diff-kept` after %s appended", mib(float64(tail))), TargetWall: diffTarget})
	ri := len(sr.Rows) - 1
	q := keeperRequest(k.module, k.local, 1, "bench")
	for i := range r.cfg.Rounds {
		r.cfg.Log.Info("shape diff round", "shape", sr.Shape, "round", i+1, "of", r.cfg.Rounds)
		ks, rep, err := r.keeperOp(ctx, r.file(), sr.Shape+"-keeper-diff", func(ctx context.Context) (*keeper.Reply, error) {
			vctx, cancel := context.WithTimeout(ctx, k.verbWait())
			defer cancel()
			return r.file().client.DiffKept(vctx, q)
		})
		if err != nil {
			return fmt.Errorf("diff-kept of %s/%s, round %d: %w", k.module, k.local, i+1, err)
		}
		if err := diffCounts(rep, stream, uint64(r.tailMsgs())); err != nil {
			return fmt.Errorf("diff-kept, round %d: %w", i+1, err)
		}
		sr.Rows[ri].Pairs.Keeper = append(sr.Rows[ri].Pairs.Keeper, ks)
		sr.Rows[ri].Took = append(sr.Rows[ri].Took, replyTook(rep))
	}
	sr.Notes = append(sr.Notes, fmt.Sprintf("every reply of `diff-kept` counted %d messages appended to `%s` and none removed", r.tailMsgs(), stream))
	return nil
}

// diffCounts checks that rep says stream gained appended messages after
// the point and lost none.
func diffCounts(rep *keeper.Reply, stream string, appended uint64) error {
	for _, c := range rep.Streams {
		if c.Stream != stream {
			continue
		}
		if c.Appended != appended || c.Removed != 0 {
			return fmt.Errorf("the reply counts %d messages appended to %s and %d removed, not %d and 0", c.Appended, stream, c.Removed, appended)
		}
		return nil
	}
	return fmt.Errorf("the reply names no stream %s (it said: %s)", stream, oneLine(rep.Said))
}

// replyTook is how long rep says the verb took (its took-ms).
func replyTook(rep *keeper.Reply) time.Duration {
	return time.Duration(rep.TookMS) * time.Millisecond
}
