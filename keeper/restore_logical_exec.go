package keeper

import (
	"context"
	"errors"
	"fmt"
)

// execute writes the keys (step logical), then sets the positions on the
// other streams. A write that fails stops the run: nothing was removed, the
// keys written hold the point's value and the others their live one. When
// the bus is away the journal stays, and the keeper finishes the run when
// it answers; otherwise the journal is closed and the error says where the
// run stopped (a restore asked again skips the keys written).
func (x *logicalRun) execute(ctx context.Context) ([]Position, error) {
	j := x.j
	if j.Step == StepLogical {
		if err := x.timed("write", func() error { return x.writeAll(ctx) }); err != nil {
			return nil, x.stopped(ctx, err)
		}
		x.checkLogical(ctx)
		j.Step = StepPosition
		if err := x.save(ctx); err != nil {
			return nil, x.stopped(ctx, err)
		}
	}
	return x.positionsStep(ctx)
}

// writeAll writes every differing key of each stream not yet written,
// saving the journal after each stream.
func (x *logicalRun) writeAll(ctx context.Context) error {
	for _, ls := range x.lp.streams {
		if len(ls.keys) == 0 || contains(x.j.Restored, ls.name) {
			continue
		}
		for i, key := range ls.keys {
			if err := x.writeKey(ctx, ls, key); err != nil {
				return fmt.Errorf("writing key %s of stream %s failed after %d of its %d differing key(s) were written: %w",
					ls.keyName(key.subject), ls.name, i, len(ls.keys), err)
			}
			x.step("logical-key:" + key.subject)
		}
		x.j.Restored = append(x.j.Restored, ls.name)
		if err := x.save(ctx); err != nil {
			return err
		}
		x.step("logical-written:" + ls.name)
	}
	return nil
}

// save saves the journal, when the run has one (it set values aside).
func (x *logicalRun) save(ctx context.Context) error {
	if x.j.Aside == "" {
		return nil
	}
	return x.journals.save(ctx, x.j)
}

// stopped is the error of a run that stopped writing.
func (x *logicalRun) stopped(ctx context.Context, err error) error {
	j := x.j
	kept := fmt.Sprintf("the live values it overwrote are set aside as %s in %s", j.Aside, x.records.abs(asideRel(j.Aside)))
	if errors.Is(err, ErrNoBus) || ctx.Err() != nil {
		return fmt.Errorf("logical restore of %s/%s: %w; nothing was removed, and %s; the restore journal stays, so the keeper finishes it when the bus answers",
			j.Module, j.Local, withKind(ErrFailed, err), kept)
	}
	x.journals.close(ctx, j)
	return fmt.Errorf("logical restore of %s/%s: %w; nothing was removed: the keys written hold the point's value, the others their live one, and %s; "+
		"ask again to write the rest (the keys written are skipped), or put the aside back", j.Module, j.Local, withKind(ErrFailed, err), kept)
}
