// Package kept is the wire contract of nats-keeper: what a verb's request
// and reply carry (Request, Reply, Point, Aside, Position, Move, Progress,
// Act, Evidence, Policy, Duration, BusIdentity), the error kinds with their
// wire and exit codes (ErrBadRequest, ErrBusy, ..., Errorf, KindOf), the
// request checks, the bounding of replies to a connection's max payload,
// and the verb names.
//
// It imports only the standard library, so that a caller of the service (a
// migration hook, the CLI, the verbs package) links none of the engine and
// none of the stores. The engine, package keeper, implements it; keeper
// aliases its names (keeper.Request is kept.Request).
package kept
