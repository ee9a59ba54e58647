package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The capture's metrics, per kept data this keeper captures: the bytes of
// the segments it wrote, when it last wrote one, and its lag (how long
// ago that was, when scraped). A keeper that stopped capturing (it died,
// or another took the capture up) stops reporting them; the one that
// captures reports them.
var (
	descCaptureBytes = prometheus.NewDesc(namespace+"_capture_segment_bytes_total",
		"Bytes of the capture segments this keeper wrote, per kept data.", []string{"module", "local"}, nil)
	descCaptureLast = prometheus.NewDesc(namespace+"_capture_last_segment_timestamp_seconds",
		"When this keeper last closed a capture segment (or found nothing new), per kept data.", []string{"module", "local"}, nil)
	descCaptureLag = prometheus.NewDesc(namespace+"_capture_lag_seconds",
		"How long ago this keeper last closed a capture segment (or found nothing new), per kept data.", []string{"module", "local"}, nil)
)

type captureSeen struct {
	bytes int64
	last  time.Time
}

// Captured is keeper.Observer's.
func (m *Metrics) Captured(module, local string, bytes int64, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.captures == nil {
		m.captures = map[kept]*captureSeen{}
	}
	c := m.captures[kept{module, local}]
	if c == nil {
		c = &captureSeen{}
		m.captures[kept{module, local}] = c
	}
	c.bytes += bytes
	c.last = at
}

// captureCollector reports the capture's metrics.
type captureCollector Metrics

func (c *captureCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCaptureBytes
	ch <- descCaptureLast
	ch <- descCaptureLag
}

func (c *captureCollector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, s := range m.captures {
		ch <- prometheus.MustNewConstMetric(descCaptureBytes, prometheus.CounterValue, float64(s.bytes), k.module, k.local)
		ch <- prometheus.MustNewConstMetric(descCaptureLast, prometheus.GaugeValue, float64(s.last.UnixNano())/1e9, k.module, k.local)
		ch <- prometheus.MustNewConstMetric(descCaptureLag, prometheus.GaugeValue, max(0, now.Sub(s.last).Seconds()), k.module, k.local)
	}
}
