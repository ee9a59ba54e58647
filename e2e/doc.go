// Package e2e holds process-level tests of nats-keeper's promise: the built
// `nats-keeper serve` binary and a `nats-server` process, driven over the bus,
// killed mid-restore, with the server restarted under it, two keepers on one
// directory, and hostile requests. It has no code of its own outside tests.
package e2e
