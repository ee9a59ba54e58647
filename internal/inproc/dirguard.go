package inproc

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/internal/privdir"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// dirGuard checks, before each verb that writes (snapshot-kept, restore-kept
// and prune-kept other than dry runs, discard-aside, discard-point), that the keeper's
// directory is still the one it started with; a verb that finds it changed
// is refused and does nothing.
type dirGuard struct {
	verbs.Engine
	dir *privdir.Dir
}

func (g *dirGuard) check(verb string) error {
	if err := g.dir.Check(); err != nil {
		return &dirChanged{said: fmt.Sprintf("%s was not started, so nothing was done: %v", verb, err), err: err}
	}
	return nil
}

// dirChanged is the refusal: kept.ErrFailed for errors.Is (a 500), and
// privdir.ErrNotPrivate.
type dirChanged struct {
	said string
	err  error
}

func (e *dirChanged) Error() string   { return e.said }
func (e *dirChanged) Unwrap() []error { return []error{e.err, kept.ErrFailed} }

func (g *dirGuard) SnapshotKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	if err := g.check(verbs.VerbSnapshot); err != nil {
		return nil, err
	}
	return g.Engine.SnapshotKept(ctx, r)
}

func (g *dirGuard) RestoreKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	if !r.DryRun {
		if err := g.check(verbs.VerbRestore); err != nil {
			return nil, err
		}
	}
	return g.Engine.RestoreKept(ctx, r)
}

func (g *dirGuard) DiscardAside(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	if err := g.check(verbs.VerbDiscard); err != nil {
		return nil, err
	}
	return g.Engine.DiscardAside(ctx, r)
}

func (g *dirGuard) DiscardPoint(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	if err := g.check(verbs.VerbDiscardPoint); err != nil {
		return nil, err
	}
	return g.Engine.DiscardPoint(ctx, r)
}

func (g *dirGuard) PruneKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	if !r.DryRun {
		if err := g.check(verbs.VerbPrune); err != nil {
			return nil, err
		}
	}
	return g.Engine.PruneKept(ctx, r)
}
