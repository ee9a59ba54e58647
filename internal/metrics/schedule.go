package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Outcomes of a scheduled point, the outcome label of
// nats_keeper_scheduled_points_total.
const (
	ScheduleTaken  = "taken"
	ScheduleFailed = "failed"
)

// Schedules is the metrics of scheduled points. Every keeper of a bus reads
// the same schedules from the shared index, so the gauges agree across
// keepers (alert on their max); the counter counts what this keeper did.
type Schedules struct {
	once     sync.Once
	nextDue  *prometheus.GaugeVec
	interval *prometheus.GaugeVec
	newest   *prometheus.GaugeVec
	points   *prometheus.CounterVec
}

// Schedules registers, on first use, and returns the schedule metrics:
//
//	nats_keeper_schedule_next_due_timestamp_seconds{module,local}
//	nats_keeper_schedule_interval_seconds{module,local}
//	nats_keeper_schedule_last_point_timestamp_seconds{module,local} (0: none yet)
//	nats_keeper_scheduled_points_total{module,local,outcome="taken"|"failed"}
func (m *Metrics) Schedules() *Schedules {
	s := &m.sched
	s.once.Do(func() {
		labels := []string{"module", "local"}
		s.nextDue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "schedule_next_due_timestamp_seconds",
			Help: "When the next scheduled point of a kept data falls due (Unix seconds)."}, labels)
		s.interval = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "schedule_interval_seconds",
			Help: "The span between a kept data's next two due times."}, labels)
		s.newest = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "schedule_last_point_timestamp_seconds",
			Help: "When a kept data's newest scheduled point was taken, by any keeper (Unix seconds; 0: none yet)."}, labels)
		s.points = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "scheduled_points_total",
			Help: "Scheduled points this keeper took (outcome taken) or failed to take when due (outcome failed)."},
			[]string{"module", "local", "outcome"})
		m.reg.MustRegister(s.nextDue, s.interval, s.newest, s.points)
	})
	return s
}

// Seen sets the gauges to the schedules read now; a schedule no longer
// read loses its series.
func (s *Schedules) Seen(scheds []keeper.Scheduled) {
	s.nextDue.Reset()
	s.interval.Reset()
	s.newest.Reset()
	for _, sc := range scheds {
		s.nextDue.WithLabelValues(sc.Module, sc.Local).Set(float64(sc.NextDue.Unix()))
		s.interval.WithLabelValues(sc.Module, sc.Local).Set(sc.Interval.Seconds())
		newest := 0.0
		if sc.Newest != nil {
			newest = float64(sc.Newest.Unix())
		}
		s.newest.WithLabelValues(sc.Module, sc.Local).Set(newest)
	}
}

// Point counts one scheduled point of module/local with its outcome.
func (s *Schedules) Point(module, local, outcome string) {
	s.points.WithLabelValues(module, local, outcome).Inc()
}
