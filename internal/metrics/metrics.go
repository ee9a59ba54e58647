// Package metrics is a keeper's Prometheus metrics and health: the
// counters and histograms of its verbs (fed by the service's observer), the
// bytes it snapshotted and restored and when it last did so per kept data
// (fed by the keeper's Observer), and, read when scraped, what it keeps
// (points and asides per kept data with their bytes, the oldest aside's age),
// its open journals, the kept data waiting for recovery, the leases it
// holds and its queued and dropped acts.
// The same counts fill each endpoint's `data` in `nats micro stats`. Handler
// serves /metrics and /healthz.
//
// It uses prometheus/client_golang, the ecosystem's library, and is imported
// only by internal/wiring: the keeper's core stays free of it.
//
// It may import keeper (the figures it reads) and verbs (the service's
// observer), never the adapters.
package metrics

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/verbs"
)

const namespace = "nats_keeper"

// Source is what the metrics read from a keeper when scraped: *keeper.Keeper
// is one.
type Source interface {
	ListKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error)
	OpenJournals(ctx context.Context) (int, error)
	LeasesHeld() int
	Acts() keeper.Acts
	// RecoveryWaits is the kept data whose interrupted restore the last
	// round of recovery could not finish (read on every scrape and
	// /healthz, from memory).
	RecoveryWaits() []keeper.RecoveryOutcome
}

// censusTTL is how long one reading of the Source serves scrapes and stats;
// any verb answered makes the next scrape read it again.
const censusTTL = 10 * time.Second

// censusTimeout bounds one reading of the Source.
const censusTimeout = 5 * time.Second

// Metrics is one keeper's metrics. It is safe for concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	snapBytes prometheus.Counter
	restBytes prometheus.Counter
	build     *prometheus.GaugeVec
	log       *slog.Logger

	mu       sync.Mutex
	src      Source
	lastSnap map[kept]time.Time // observed in this process
	lastRest map[kept]time.Time
	outcomes map[string]map[string]uint64 // verb → outcome → answered
	snapped  uint64                       // bytes, for micro stats
	restored uint64
	census   *census
	readAt   time.Time
	stale    bool

	sched    Schedules // see Schedules
	captures map[kept]*captureSeen
}

type kept struct{ module, local string }

// New makes the metrics, registered with the Go runtime's and the process's
// collectors. Watch gives it the keeper to read when scraped.
func New(log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.Default()
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "verb_requests_total",
			Help: "Requests answered, per verb and outcome (ok, bad_request, not_found, conflict, locked, failed, unavailable)."},
			[]string{"verb", "outcome"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "verb_duration_seconds",
			Help:    "Time from a request's arrival to its reply, per verb and outcome.",
			Buckets: []float64{.005, .025, .1, .5, 1, 5, 15, 60, 300, 900, 3600}},
			[]string{"verb", "outcome"}),
		snapBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "snapshot_bytes_total",
			Help: "Bytes of the restore points' archives this keeper wrote."}),
		restBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "restore_bytes_total",
			Help: "Bytes of archives this keeper restored onto the bus."}),
		build: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
			Help: "Always 1, labelled with the keeper's version, its VCS revision (empty when the build does not know it) and its Go version."},
			[]string{"version", "revision", "goversion"}),
		log:      log,
		lastSnap: map[kept]time.Time{},
		lastRest: map[kept]time.Time{},
		outcomes: map[string]map[string]uint64{},
	}
	m.reg.MustRegister(m.requests, m.durations, m.snapBytes, m.restBytes, m.build, (*keptCollector)(m), (*captureCollector)(m),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Schedules()
	return m
}

// Build sets nats_keeper_build_info to the keeper's version and VCS revision
// ("" when not known), with the Go version; a later call replaces the
// earlier.
func (m *Metrics) Build(version, revision string) {
	m.build.Reset()
	m.build.WithLabelValues(version, revision, runtime.Version()).Set(1)
}

// Registry is where the metrics are registered, for Handler and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Watch sets the keeper whose census the metrics read when scraped.
func (m *Metrics) Watch(src Source) {
	m.mu.Lock()
	m.src, m.census = src, nil
	m.mu.Unlock()
}

// Outcome names a wire code for the outcome label.
func Outcome(code int) string {
	switch code {
	case 200:
		return "ok"
	case verbs.CodeBadRequest:
		return "bad_request"
	case verbs.CodeNotFound:
		return "not_found"
	case verbs.CodeConflict:
		return "conflict"
	case verbs.CodeNoBus:
		return "unavailable"
	case verbs.CodeLocked:
		return "locked"
	case verbs.CodeFailed:
		return "failed"
	}
	return "code_" + strconv.Itoa(code)
}

// Answered counts one request answered (the service's observer).
func (m *Metrics) Answered(verb string, code int, took time.Duration) {
	o := Outcome(code)
	m.requests.WithLabelValues(verb, o).Inc()
	m.durations.WithLabelValues(verb, o).Observe(took.Seconds())
	m.mu.Lock()
	if m.outcomes[verb] == nil {
		m.outcomes[verb] = map[string]uint64{}
	}
	m.outcomes[verb][o]++
	m.stale = true // what is kept may have changed
	m.mu.Unlock()
}

// Snapshotted is keeper.Observer's.
func (m *Metrics) Snapshotted(module, local string, bytes int64, at time.Time) {
	m.moved(m.snapBytes, &m.snapped, m.lastSnap, module, local, bytes, at)
}

// Restored is keeper.Observer's.
func (m *Metrics) Restored(module, local string, bytes int64, at time.Time) {
	m.moved(m.restBytes, &m.restored, m.lastRest, module, local, bytes, at)
}

// moved counts bytes snapshotted or restored, and when, for module/local.
func (m *Metrics) moved(c prometheus.Counter, total *uint64, last map[kept]time.Time, module, local string, bytes int64, at time.Time) {
	c.Add(float64(bytes))
	m.mu.Lock()
	*total += uint64(bytes)
	last[kept{module, local}] = at
	m.stale = true
	m.mu.Unlock()
}

var _ keeper.Observer = (*Metrics)(nil)
