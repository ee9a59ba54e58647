package metrics

import (
	"context"
	"maps"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// StatsData is the `data` of the verb's endpoint in `nats micro stats`
// (verbs.WithStatsData): its answered requests per outcome; for
// snapshot-kept and restore-kept the bytes snapshotted or restored; and, for
// list-kept, the census the metrics report (points and asides with their
// bytes, the oldest aside's age, journals open, leases held, acts queued and
// dropped).
func (m *Metrics) StatsData(verb string) map[string]any {
	m.mu.Lock()
	d := map[string]any{"outcomes": maps.Clone(m.outcomes[verb])}
	switch verb {
	case keeper.VerbSnapshot:
		d["bytes_total"] = m.snapped
	case keeper.VerbRestore:
		d["bytes_total"] = m.restored
	}
	src := m.src
	m.mu.Unlock()
	if d["outcomes"] == nil {
		d["outcomes"] = map[string]uint64{}
	}
	if verb != keeper.VerbList || src == nil {
		return d
	}
	c := m.current(context.Background())
	if c == nil {
		return d
	}
	var points, asides int
	var pointBytes, asideBytes int64
	for _, kc := range c.kept {
		points, asides = points+kc.points, asides+kc.asides
		pointBytes, asideBytes = pointBytes+kc.pointBytes, asideBytes+kc.asideBytes
	}
	age := 0.0
	if !c.oldestAside.IsZero() {
		age = time.Since(c.oldestAside).Round(time.Second).Seconds()
	}
	d["keeper"] = map[string]any{
		"points": points, "point_bytes": pointBytes, "asides": asides, "aside_bytes": asideBytes,
		"oldest_aside_age_seconds": age, "journals_open": c.journals, "leases_held": src.LeasesHeld(),
		"acts_queued": c.actsQueued, "acts_dropped": c.actsDropped,
	}
	return d
}
