package verbs

import (
	"context"

	"github.com/nats-keeper/nats-keeper/kept"
)

// Engine is what the service needs of the keeper: Handle runs the verb
// named verb (one of kept.Verbs) on r, as *keeper.Keeper does. It must be
// safe for concurrent use, must refuse a second verb on the same kept data
// with an error wrapping kept.ErrBusy, and must give every error its kind
// (kept.Errorf), which Code maps to the wire.
type Engine interface {
	Handle(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error)
}

// Handler runs one verb's request.
type Handler func(ctx context.Context, r kept.Request) (*kept.Reply, error)

// Middleware wraps the handler of the verb v, as net/http's and micro's
// do: it returns next itself, or a handler that does something around it
// (a check, a hook). The service builds each verb's handler from the
// engine and the middleware (WithMiddleware), so nothing lists the verbs
// again.
type Middleware func(v kept.Verb, next Handler) Handler

// WithMiddleware wraps the handler of every verb in mw, the first
// outermost; a nil Middleware is skipped. Given more than once, the
// middleware of the later option runs inside that of the earlier.
func WithMiddleware(mw ...Middleware) ServeOption {
	return serveOption(func(c *serveConfig) { c.middleware = append(c.middleware, mw...) })
}

// handlers is the handler of each verb of the table: e's, wrapped in mw.
func handlers(e Engine, mw []Middleware) map[string]Handler {
	hs := map[string]Handler{}
	for _, v := range kept.Verbs() {
		h := Handler(func(ctx context.Context, r kept.Request) (*kept.Reply, error) { return e.Handle(ctx, v.Name, r) })
		for i := len(mw) - 1; i >= 0; i-- {
			if mw[i] != nil {
				h = mw[i](v, h)
			}
		}
		hs[v.Name] = h
	}
	return hs
}
