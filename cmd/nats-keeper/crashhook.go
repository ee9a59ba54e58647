package main

import (
	"context"
	"log/slog"
	"os"
	"syscall"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// crashEnv names the restore step at which the keeper kills itself with
// SIGKILL. It exists only for crash tests, which prove that a keeper killed at
// any step recovers when it starts again; nothing else should set it.
const crashEnv = "NATS_KEEPER_CRASH_AT"

// crashHook returns the keeper's step hook: nil unless crashEnv is set.
func crashHook(log *slog.Logger) func(string) {
	at := os.Getenv(crashEnv)
	if at == "" {
		return nil
	}
	log.Warn("crash test: the keeper will kill itself at a restore step", "step", at)
	return func(step string) {
		if step == at {
			log.Warn("crash test: killing the keeper", "step", step)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}

// hangEnv names a verb that, for tests only, waits for its context to end
// before it does anything, and then fails: it exists only for the test that
// proves a stop with a stuck verb ends after --stop-timeout. Nothing else
// should set it.
const hangEnv = "NATS_KEEPER_TEST_HANG_VERB"

// hangHook returns k itself unless hangEnv is set.
func hangHook(k *keeper.Keeper, log *slog.Logger) verbs.Engine {
	verb := os.Getenv(hangEnv)
	if verb == "" {
		return k
	}
	log.Warn("hang test: a verb will wait for its context to end", "verb", verb)
	return &hangEngine{Keeper: k, verb: verb, log: log}
}

// hangEngine is a keeper whose verb hang waits for its context to end.
type hangEngine struct {
	*keeper.Keeper
	verb string
	log  *slog.Logger
}

func (h *hangEngine) hang(ctx context.Context, verb string) error {
	if verb != h.verb {
		return nil
	}
	h.log.Warn("hang test: the verb waits for its context to end", "verb", verb)
	<-ctx.Done()
	return errorf(keeper.ErrFailed, "hang test: %s waited for its context, which ended (%w), so nothing was done", verb, ctx.Err())
}

func (h *hangEngine) SnapshotKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	if err := h.hang(ctx, verbs.VerbSnapshot); err != nil {
		return nil, err
	}
	return h.Keeper.SnapshotKept(ctx, r)
}

func (h *hangEngine) RestoreKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	if err := h.hang(ctx, verbs.VerbRestore); err != nil {
		return nil, err
	}
	return h.Keeper.RestoreKept(ctx, r)
}

func (h *hangEngine) DiscardAside(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	if err := h.hang(ctx, verbs.VerbDiscard); err != nil {
		return nil, err
	}
	return h.Keeper.DiscardAside(ctx, r)
}

func (h *hangEngine) ListKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	if err := h.hang(ctx, verbs.VerbList); err != nil {
		return nil, err
	}
	return h.Keeper.ListKept(ctx, r)
}

func (h *hangEngine) VerifyKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	if err := h.hang(ctx, verbs.VerbVerify); err != nil {
		return nil, err
	}
	return h.Keeper.VerifyKept(ctx, r)
}

func (h *hangEngine) PruneKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	if err := h.hang(ctx, verbs.VerbPrune); err != nil {
		return nil, err
	}
	return h.Keeper.PruneKept(ctx, r)
}
