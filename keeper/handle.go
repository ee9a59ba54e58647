package keeper

import (
	"context"

	"github.com/nats-keeper/nats-keeper/kept"
)

// handlers binds each verb of the table (kept.Verbs) to the Keeper's method
// that runs it; handle_test.go checks that every verb of the table has one
// and that none is bound to a verb the table lacks.
var handlers = map[string]func(*Keeper, context.Context, Request) (*Reply, error){
	kept.VerbSnapshot:     (*Keeper).SnapshotKept,
	kept.VerbRestore:      (*Keeper).RestoreKept,
	kept.VerbDiscard:      (*Keeper).DiscardAside,
	kept.VerbList:         (*Keeper).ListKept,
	kept.VerbVerify:       (*Keeper).VerifyKept,
	kept.VerbPrune:        (*Keeper).PruneKept,
	kept.VerbSetPlan:      (*Keeper).SetPlan,
	kept.VerbShowPlan:     (*Keeper).ShowPlan,
	kept.VerbRemovePlan:   (*Keeper).RemovePlan,
	kept.VerbShowEvidence: (*Keeper).ShowEvidence,
	kept.VerbDiscardPoint: (*Keeper).DiscardPoint,
	kept.VerbDiff:         (*Keeper).DiffKept,
	kept.VerbCapture:      (*Keeper).CaptureKept,
}

// Handle runs the verb named verb on r: the one entry the service calls
// (verbs.Engine). A verb the table lacks is refused, and nothing is done.
func (k *Keeper) Handle(ctx context.Context, verb string, r Request) (*Reply, error) {
	h, ok := handlers[verb]
	if !ok {
		return nil, Errorf(ErrBadRequest, "%s is not a verb of nats-keeper, so nothing was done", verb)
	}
	return h(k, ctx, r)
}

// HandledVerbs is the names of the verbs Handle runs, in no order.
func HandledVerbs() []string {
	names := make([]string, 0, len(handlers))
	for name := range handlers {
		names = append(names, name)
	}
	return names
}
