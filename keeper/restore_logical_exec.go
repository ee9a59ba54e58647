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
		if err := x.writeKeys(ctx, ls); err != nil {
			return err
		}
		x.j.Restored = append(x.j.Restored, ls.name)
		if err := x.save(ctx); err != nil {
			return err
		}
		x.step("logical-written:" + ls.name)
	}
	return nil
}

// logicalInFlight is how many keys of a KV bucket a logical restore writes
// at once: one publish waits for its stream's acknowledgement, so 100 keys
// one by one cost 100 round trips. Keys are independent; an object's
// chunks and meta are written in order, one object at a time.
const logicalInFlight = 32

// writeKeys writes the differing keys of ls, up to logicalInFlight KV keys
// at once, taking their results in order. On a failure it waits for the
// writes under way, so that none is left running when it returns.
func (x *logicalRun) writeKeys(ctx context.Context, ls *logicalStream) error {
	inFlight := logicalInFlight
	if ls.object {
		inFlight = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]chan error, len(ls.keys))
	next := 0 // the key whose result is taken next
	take := func() error {
		err := <-results[next]
		if err != nil {
			cancel()
			for _, r := range results[next+1:] {
				if r != nil {
					<-r
				}
			}
			return fmt.Errorf("writing key %s of stream %s failed after %d of its %d differing key(s) were written (and some sent at the same time may be): %w",
				ls.keyName(ls.keys[next].subject), ls.name, next, len(ls.keys), err)
		}
		x.step("logical-key:" + ls.keys[next].subject)
		next++
		return nil
	}
	for i, key := range ls.keys {
		if i-next >= inFlight {
			if err := take(); err != nil {
				return err
			}
		}
		results[i] = make(chan error, 1)
		go func() { results[i] <- x.writeKey(ctx, ls, key) }()
	}
	for next < len(ls.keys) {
		if err := take(); err != nil {
			return err
		}
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
