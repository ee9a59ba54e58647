package wiring

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/internal/privdir"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// dirGuard is the middleware that checks, before each verb that writes (a
// verb the table marks Writes: snapshot-kept, restore-kept and prune-kept
// other than dry runs, discard-aside, discard-point), that the keeper's
// directory is still the one it started with; a verb that finds it changed
// is refused and does nothing.
func dirGuard(dir *privdir.Dir) verbs.Middleware {
	return func(v kept.Verb, next verbs.Handler) verbs.Handler {
		if !v.Writes {
			return next
		}
		return func(ctx context.Context, r kept.Request) (*kept.Reply, error) {
			if !r.DryRun {
				if err := dir.Check(); err != nil {
					return nil, &dirChanged{said: fmt.Sprintf("%s was not started, so nothing was done: %v", v.Name, err), err: err}
				}
			}
			return next(ctx, r)
		}
	}
}

// dirChanged is the refusal: kept.ErrFailed for errors.Is (a 500), and
// privdir.ErrNotPrivate.
type dirChanged struct {
	said string
	err  error
}

func (e *dirChanged) Error() string   { return e.said }
func (e *dirChanged) Unwrap() []error { return []error{e.err, kept.ErrFailed} }
