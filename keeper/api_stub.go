package keeper

// Signatures of the Keeper's verbs, so verbs/ can be written against them.
// Replaced by the engine (snapshot.go, restore.go, …).

import "context"

// Keeper runs the verbs. It is safe for concurrent use: verbs on different
// kept data run at once; two verbs that touch the same kept data never
// interleave, the second fails with ErrBusy naming the holder.
type Keeper struct{ cfg Config }

// New opens the keeper's directory (making it 0700), removes leftover
// .partial directories and returns a Keeper.
func New(ctx context.Context, cfg Config) (*Keeper, error) { return &Keeper{cfg: cfg}, nil }

// Dir is the keeper's directory.
func (k *Keeper) Dir() string { return k.cfg.Dir }

// SnapshotKept takes the restore point of one kept data.
func (k *Keeper) SnapshotKept(ctx context.Context, r Request) (*Reply, error) { return nil, ErrFailed }

// RestoreKept restores a point beside the live data, or with AsideOnly only
// sets the live data aside; DryRun replies with the plan and changes nothing.
func (k *Keeper) RestoreKept(ctx context.Context, r Request) (*Reply, error) { return nil, ErrFailed }

// DiscardAside removes one set-aside copy (r.From is its id) on a person's
// call; r.Why is required and the hand act is recorded first.
func (k *Keeper) DiscardAside(ctx context.Context, r Request) (*Reply, error) { return nil, ErrFailed }

// ListKept lists points and asides, optionally of one module / kept data.
func (k *Keeper) ListKept(ctx context.Context, r Request) (*Reply, error) { return nil, ErrFailed }

// VerifyKept re-checks one point's archive against its manifest.
func (k *Keeper) VerifyKept(ctx context.Context, r Request) (*Reply, error) { return nil, ErrFailed }

// Rebuild rewrites the index's point.* and aside.* records from the files.
func (k *Keeper) Rebuild(ctx context.Context) error { return nil }

// SetPlan records the plan of one kept data.
func (k *Keeper) SetPlan(ctx context.Context, p Plan) error { return nil }
