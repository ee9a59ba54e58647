package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper"
	keptwire "github.com/nats-keeper/nats-keeper/kept"
)

// The rollbacks of issue 40, whose cost follows what changed since the
// point: each shape takes a point first (not timed), then, before every
// timed rollback, makes the change a migration would (not timed), and after
// each checks that the data is the point's again. The shapes are in
// shape_methods_kinds.go; the diff's in shape_diff.go.

// Targets of issue 40.
const (
	deltaTarget     = 0.05 // auto (delta) rollback ÷ the rollback by hand
	logicalTarget   = 0.05 // logical rollback ÷ the rollback by hand
	nonPrefixTarget = 1.05 // auto (full) ÷ full: "no slower than today", with 5% of tolerance
)

// methodRun is one comparison of a rollback with a restore method.
type methodRun struct {
	k      kept
	op     string  // the row's operation
	method string  // asked of the keeper's timed rollback
	picks  string  // the method its reply must give every stream
	target float64 // the keeper's rollback ÷ the other side at most
	// versus is the other side: "" for the rollback by hand with the nats
	// CLI (backup of the live data, rm, restore of the point's backup),
	// else the keeper's own restore-kept with this method.
	versus string
	// change is the migration made before every timed rollback, of either
	// side (not timed).
	change func(context.Context) error
	// check says whether the data is the point's again after a rollback by
	// who; want is the streams' sums at the point, first is the first round.
	check func(ctx context.Context, who string, want map[string]streamSum, first bool) error
}

// methodPairs measures m in rounds: change, the keeper's rollback (timed)
// and its check, change again, the other side (timed) and its check. The
// rollback by hand goes on as long as it passes, as in rollbackPairs.
func (r *run) methodPairs(ctx context.Context, sr *ShapeResult, m methodRun) error {
	want, err := r.before(ctx, sr, m.k)
	if err != nil {
		return err
	}
	pointDir := func(s string) string { return filepath.Join(r.work, "nats-backup", "point-"+s) }
	asideDir := func(s string) string { return filepath.Join(r.work, "nats-backup", "aside-"+s) }
	if err := r.takePoint(ctx, sr, m.k, m.versus == "", pointDir); err != nil {
		return err
	}
	row := ShapeRow{Op: m.op, Target: m.target}
	if m.versus == "" {
		row.CLI = "`" + byHandCommands(m.k.streams) + "`"
	} else {
		row.Versus = fmt.Sprintf("`restore-kept` method %s after the same change", m.versus)
	}
	sr.Rows = append(sr.Rows, row)
	ri := len(sr.Rows) - 1
	var handFailed error
	for i := range r.cfg.Rounds {
		r.cfg.Log.Info("shape method pair", "shape", sr.Shape, "method", m.method, "round", i+1, "of", r.cfg.Rounds)
		if m.versus != "" {
			ks, vs, err := r.versusRounds(ctx, sr, m, want, i)
			if err != nil {
				return err
			}
			p := &sr.Rows[ri].Pairs
			p.Keeper, p.Nats = append(p.Keeper, ks), append(p.Nats, vs)
			continue
		}
		ks, err := r.methodRound(ctx, sr, m, m.method, m.picks, want, i)
		if err != nil {
			return err
		}
		sr.Rows[ri].Pairs.Keeper = append(sr.Rows[ri].Pairs.Keeper, ks)
		if handFailed != nil {
			continue
		}
		ns, err := r.byHandRound(ctx, sr, m, want, i, pointDir, asideDir)
		if err != nil {
			handFailed = fmt.Errorf("round %d: %w", i+1, err)
			r.cfg.Log.Warn("the rollback by hand failed; the keeper's rounds go on without it", "round", i+1, "err", err)
			if err := r.restoreUntimed(ctx, m.k, want); err != nil {
				return fmt.Errorf("after the rollback by hand failed: %w", err)
			}
			continue
		}
		sr.Rows[ri].Pairs.Nats = append(sr.Rows[ri].Pairs.Nats, ns)
	}
	if handFailed != nil {
		sr.Rows[ri].Pairs.Nats = nil
		sr.Notes = append(sr.Notes, "the rollback by hand failed, so the row has no CLI side (the keeper's rounds went on): "+oneLine(handFailed.Error()))
	}
	return nil
}

// takePoint takes the point of k (not timed) and, for a rollback by hand,
// a `nats backup stream` of each stream right after it (not timed).
func (r *run) takePoint(ctx context.Context, sr *ShapeResult, k kept, byHand bool, pointDir func(string) string) error {
	if _, _, err := r.keeperVerb(ctx, sr.Shape+"-keeper-point", k, r.file().client.SnapshotKept); err != nil {
		return fmt.Errorf("snapshot-kept of %s/%s, the point to roll back to: %w", k.module, k.local, err)
	}
	if !byHand {
		return nil
	}
	if _, err := r.natsOp(ctx, sr.Shape+"-nats-point", k.streams, func(s string) []string {
		return []string{"backup", "stream", s, pointDir(s), "--no-progress"}
	}); err != nil {
		return fmt.Errorf("nats backup stream, the point to roll back to: %w", err)
	}
	return nil
}

// versusRounds is round i of a rollback against the keeper's own with
// another method: m.method first in even rounds, m.versus first in odd
// ones, so that neither always comes first.
func (r *run) versusRounds(ctx context.Context, sr *ShapeResult, m methodRun, want map[string]streamSum, i int) (Sample, Sample, error) {
	first, second := m.method, m.versus
	if i%2 == 1 {
		first, second = second, first
	}
	a, err := r.methodRound(ctx, sr, m, first, m.pickOf(first), want, i)
	if err != nil {
		return Sample{}, Sample{}, err
	}
	b, err := r.methodRound(ctx, sr, m, second, m.pickOf(second), want, i)
	if i%2 == 1 {
		a, b = b, a
	}
	return a, b, err
}

// pickOf is the method the reply must give every stream when method is
// asked.
func (m methodRun) pickOf(method string) string {
	if method == m.method {
		return m.picks
	}
	return method
}

// methodRound is one timed rollback of the keeper with method, after
// m.change: its reply must give every stream the method picks; the data is
// checked and the aside discarded (neither timed). In the first round the
// notes get why the keeper said it picked the method of the first stream.
func (r *run) methodRound(ctx context.Context, sr *ShapeResult, m methodRun, method, picks string, want map[string]streamSum, i int) (Sample, error) {
	if err := m.change(ctx); err != nil {
		return Sample{}, fmt.Errorf("the migration before round %d: %w", i+1, err)
	}
	if err := r.waitAllFiles(ctx, m.k.streams); err != nil {
		return Sample{}, err
	}
	ks, rep, err := r.keeperVerb(ctx, sr.Shape+"-keeper-"+method, m.k, func(ctx context.Context, q keeper.Request) (*keeper.Reply, error) {
		q.Method = method
		return r.file().client.RestoreKept(ctx, q)
	})
	if err != nil {
		return Sample{}, fmt.Errorf("restore-kept method %s of %s/%s, round %d: %w", method, m.k.module, m.k.local, i+1, err)
	}
	why, err := pickedEach(rep, m.k.streams, picks)
	if err != nil {
		return Sample{}, fmt.Errorf("restore-kept method %s, round %d: %w", method, i+1, err)
	}
	if err := m.check(ctx, "restore-kept method "+method, want, i == 0); err != nil {
		return Sample{}, fmt.Errorf("round %d: %w", i+1, err)
	}
	if rep.Aside != nil {
		discard := keeperRequest("", "", 0, "")
		discard.Why = "benchmark: the aside is not needed"
		if _, err := r.file().client.DiscardAside(ctx, rep.Aside.ID, discard); err != nil {
			return Sample{}, fmt.Errorf("discard-aside %s: %w", rep.Aside.ID, err)
		}
	}
	if i == 0 {
		sr.Notes = append(sr.Notes, fmt.Sprintf("the keeper's reply to `restore-kept` method %s gave every stream method %s in every round (round 1: %s)", method, picks, why))
	}
	return ks, nil
}

// byHandRound is one rollback by hand after m.change, checked (not timed).
func (r *run) byHandRound(ctx context.Context, sr *ShapeResult, m methodRun, want map[string]streamSum, i int, pointDir, asideDir func(string) string) (Sample, error) {
	if err := m.change(ctx); err != nil {
		return Sample{}, fmt.Errorf("the migration before the rollback by hand: %w", err)
	}
	if err := r.waitAllFiles(ctx, m.k.streams); err != nil {
		return Sample{}, err
	}
	ns, err := r.rollbackByHand(ctx, sr.Shape, m.k.streams, pointDir, asideDir)
	if err != nil {
		return Sample{}, err
	}
	return ns, m.check(ctx, "the rollback by hand", want, i == 0)
}

// pickedEach checks that rep gives each of streams the method want, and
// returns why it gave the first stream its method.
func pickedEach(rep *keeper.Reply, streams []string, want string) (string, error) {
	got := map[string]keptwire.StreamChange{}
	for _, c := range rep.Streams {
		got[c.Stream] = c
	}
	for _, s := range streams {
		c, ok := got[s]
		switch {
		case !ok:
			return "", fmt.Errorf("the reply names no method for stream %s (it said: %s)", s, oneLine(rep.Said))
		case c.Method != want:
			return "", fmt.Errorf("the reply gave stream %s method %q (%s), not %s", s, c.Method, oneLine(c.Why), want)
		}
	}
	return strings.TrimSpace(got[streams[0]].Why), nil
}

// byHandCommands is the rollback by hand of streams, as the report shows it.
func byHandCommands(streams []string) string {
	var by []string
	for _, s := range streams {
		by = append(by, fmt.Sprintf("nats backup stream %s DIR/aside-%s --no-progress && nats stream rm -f %s && nats --timeout %s backup restore stream DIR/point-%s --no-progress", s, s, s, cliTimeout, s))
	}
	return strings.Join(by, " && ")
}

// keeperMethodFull is the full method's name, for the files that name the
// type kept (bench's) rather than the package.
const keeperMethodFull = keptwire.MethodFull
