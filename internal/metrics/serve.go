package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// healthTimeout bounds one /healthz check.
const healthTimeout = 5 * time.Second

// Handler serves /metrics (the Prometheus text format) and /healthz: 200
// while health returns nil, else 503 with health's sentence. A healthy
// answer names, a line each, the kept data waiting for recovery: one kept
// data's wait does not make the keeper unhealthy, as it serves the rest.
func (m *Metrics) Handler(health func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: 30 * time.Second}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := health(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok: connected to the bus, the index answers and the store is reachable")
		for _, o := range m.recoveryWaits() {
			fmt.Fprintf(w, "waiting for recovery: %s/%s since %s (its verbs are refused; every other kept data is served): %v\n",
				o.Module, o.Local, o.Since.UTC().Format(time.RFC3339), o.Err)
		}
	})
	return mux
}

// recoveryWaits is the watched keeper's kept data waiting for recovery;
// none before Watch.
func (m *Metrics) recoveryWaits() []keeper.RecoveryOutcome {
	m.mu.Lock()
	src := m.src
	m.mu.Unlock()
	if src == nil {
		return nil
	}
	return src.RecoveryWaits()
}

// listenError is a failure to listen: keeper.ErrConflict for errors.Is (the
// address is taken, or not this host's).
type listenError struct{ said string }

func (e *listenError) Error() string { return e.said }
func (e *listenError) Unwrap() error { return keeper.ErrConflict }

// Server is the metrics and health listener.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Listen listens on addr (host:port) and serves Handler(health) until
// Close. A failure to listen wraps keeper.ErrConflict.
func (m *Metrics) Listen(addr string, health func(context.Context) error) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &listenError{said: fmt.Sprintf("cannot listen on %s for metrics (%v)", addr, err)}
	}
	s := &Server{addr: l.Addr(), done: make(chan struct{}), srv: &http.Server{
		Handler:           m.Handler(health),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("the metrics listener stopped", "addr", s.addr.String(), "err", err)
		}
	}()
	m.log.Info("serving metrics and health", "addr", s.addr.String(), "paths", "/metrics /healthz")
	return s, nil
}

// Addr is where the server listens.
func (s *Server) Addr() string { return s.addr.String() }

// Close stops the server, letting requests in flight end for a few
// seconds, and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}
