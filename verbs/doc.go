// Package verbs is nats-keeper on the bus: the micro service that answers
// the keeper's verbs, and the typed Go client that sends them. It imports
// the contract (kept) and nats.go, and nothing of the engine or the stores
// (deps_test.go), so a migration hook that imports it links neither.
//
// # The service
//
// Serve puts an Engine (a *keeper.Keeper, or anything whose Handle runs the
// verbs) on a NATS connection: one endpoint per verb of the table,
// kept.Verbs, on <prefix>.<verb> (prefix
// DefaultPrefix, "mesh-broker", unless WithPrefix says otherwise), in the
// queue group QueueGroup so that several keepers share the load, and the
// $SRV discovery protocol so that `nats micro ls/info/stats/ping` see it.
// Each request is decoded strictly (DecodeRequest: one JSON object of at
// most MaxBody bytes, the contract's keys only) and run in a goroutine of
// its own; Stop lets the verbs in flight finish, for at most
// WithStopTimeout, before it cancels them. A verb's handler is the
// engine's, wrapped in the Middleware given WithMiddleware (a check or a
// hook around every verb, or the verbs the table marks), and its admission
// follows the verb's Weight in the table. The options of Serve are
// ServeOptions.
//
// # The client
//
// NewClient returns a Client for migration hooks and tools: SnapshotKept
// before a change, RestoreKept to undo it, and the other verbs; Do sends any
// verb of the table by its name. Its options
// are ClientOptions (WithPrefix is both kinds).
//
//	c := verbs.NewClient(nc, verbs.WithTimeout(30*time.Minute))
//	req := kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: hash, Caller: "deploy"}
//	if _, err := c.SnapshotKept(ctx, req); err != nil {
//		return err // no restore point, no migration
//	}
//
// # Errors and wire codes
//
// A failure reply carries the micro error headers (Nats-Service-Error, the
// sentence; Nats-Service-Error-Code, the code) and an ErrorBody. Code maps an
// error's kind (kept.KindOf) to its wire code by kept's one table of kinds,
// wire codes and exit codes: 400 bad
// request, 404 not found, 409 conflict or busy (ErrorBody.Busy), 423 locked
// (an encrypted archive and no identity that decrypts it), 500 failed, 503
// no bus or a stopping keeper. The client turns a failure reply
// back into an *Error that errors.Is matches to the keeper's sentinels
// (kept.ErrNotFound, kept.ErrBusy, ...), and a request the server
// refused the user, or that no keeper answered, into kept.ErrDenied or
// kept.ErrNoBus. A verb whose keeper stopped answering mid-way (it sends
// beats while it runs, see BeatHeader) is followed through recovery, and
// becomes, when no outcome is known in time, kept.ErrCutShort (code 504,
// given by the client only).
package verbs
