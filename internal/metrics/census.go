package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// census is what a keeper keeps and holds, read from its index when scraped.
type census struct {
	kept        map[kept]*keptCount
	oldestAside time.Time // zero when there is no aside
	journals    int
	leases      int
	actsQueued  int
	actsDropped uint64
}

// keptCount is one kept data's points and asides.
type keptCount struct {
	points, asides         int
	pointBytes, asideBytes int64
	newestPoint            time.Time // the last successful snapshot the index knows
	lastRestoreAside       time.Time // the newest aside a restore made
}

// read reads the census from src.
func read(ctx context.Context, src Source) (*census, error) {
	rep, err := src.ListKept(ctx, keeper.Request{})
	if err != nil {
		return nil, err
	}
	journals, err := src.OpenJournals(ctx)
	if err != nil {
		return nil, err
	}
	c := &census{kept: map[kept]*keptCount{}, journals: journals, leases: src.LeasesHeld()}
	get := func(module, local string) *keptCount {
		k := kept{module, local}
		if c.kept[k] == nil {
			c.kept[k] = &keptCount{}
		}
		return c.kept[k]
	}
	for _, p := range rep.Points {
		kc := get(p.Module, p.Local)
		kc.points++
		kc.pointBytes += p.ArchiveSize
		if p.Taken.After(kc.newestPoint) {
			kc.newestPoint = p.Taken
		}
	}
	for _, a := range rep.Asides {
		kc := get(a.Module, a.Local)
		kc.asides++
		kc.asideBytes += a.ArchiveSize
		if a.Reason == "restore" && a.Point != "" && a.Taken.After(kc.lastRestoreAside) {
			kc.lastRestoreAside = a.Taken
		}
		if c.oldestAside.IsZero() || a.Taken.Before(c.oldestAside) {
			c.oldestAside = a.Taken
		}
	}
	if b, ok := src.Acts().(keeper.ActsBacklog); ok {
		c.actsQueued, c.actsDropped = b.ActsQueued(), b.ActsDropped()
	}
	return c, nil
}

// current is the census, read again when it is older than censusTTL or a
// verb was answered since. A failed reading is logged and the last good one
// serves; nil when there is none (no Source yet, or never read).
func (m *Metrics) current(ctx context.Context) *census {
	m.mu.Lock()
	src, c, fresh := m.src, m.census, !m.stale && time.Since(m.readAt) < censusTTL
	m.mu.Unlock()
	if src == nil || (c != nil && fresh) {
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, censusTimeout)
	defer cancel()
	n, err := read(ctx, src)
	if err != nil {
		m.log.Warn("could not read what the keeper keeps for its metrics; the last reading serves", "err", err)
		return c
	}
	m.mu.Lock()
	m.census, m.readAt, m.stale = n, time.Now(), false
	m.mu.Unlock()
	return n
}

// keptCollector reports the census, and the times of the last snapshot and
// restore per kept data.
type keptCollector Metrics

var (
	keptLabels  = []string{"module", "local"}
	descPoints  = desc("points", "Restore points per kept data.", keptLabels...)
	descPBytes  = desc("point_bytes", "Bytes of the restore points' archives per kept data.", keptLabels...)
	descAsides  = desc("asides", "Set-aside copies per kept data.", keptLabels...)
	descABytes  = desc("aside_bytes", "Bytes of the set-aside copies' archives per kept data.", keptLabels...)
	descOldest  = desc("oldest_aside_age_seconds", "Age of the oldest set-aside copy (0: none).")
	descLastSn  = desc("last_snapshot_success_timestamp_seconds", "Unix time of the last successful snapshot per kept data.", keptLabels...)
	descLastRe  = desc("last_restore_success_timestamp_seconds", "Unix time of the last successful restore per kept data.", keptLabels...)
	descJournal = desc("journals_open", "Restore journals in the index: restores in progress or waiting to be finished or undone.")
	descLeases  = desc("leases_held", "Leases this keeper holds in the index.")
	descQueued  = desc("acts_queued", "Acts waiting to be recorded on the bus.")
	descDropped = desc("acts_dropped_total", "Acts dropped: the acts queue was full, or an act could be neither queued nor recorded.")
	descWaiting = desc("recovery_waiting", "Kept data whose interrupted restore recovery could not finish yet: their verbs are refused, and recovery tries again.")
	descWaitSin = desc("recovery_waiting_since_timestamp_seconds", "Unix time since which a kept data waits for recovery.", keptLabels...)
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

func (c *keptCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoints, descPBytes, descAsides, descABytes, descOldest, descLastSn, descLastRe,
		descJournal, descLeases, descQueued, descDropped, descWaiting, descWaitSin} {
		ch <- d
	}
}

func (c *keptCollector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	cen := m.current(context.Background())
	m.mu.Lock()
	src, lastSnap, lastRest := m.src, copyTimes(m.lastSnap), copyTimes(m.lastRest)
	m.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if cen != nil {
		for k, kc := range cen.kept {
			gauge(descPoints, float64(kc.points), k.module, k.local)
			gauge(descPBytes, float64(kc.pointBytes), k.module, k.local)
			gauge(descAsides, float64(kc.asides), k.module, k.local)
			gauge(descABytes, float64(kc.asideBytes), k.module, k.local)
			lastSnap[k] = later(lastSnap[k], kc.newestPoint)
			lastRest[k] = later(lastRest[k], kc.lastRestoreAside)
		}
		age := 0.0
		if !cen.oldestAside.IsZero() {
			age = max(0, time.Since(cen.oldestAside).Seconds())
		}
		gauge(descOldest, age)
		gauge(descJournal, float64(cen.journals))
		gauge(descQueued, float64(cen.actsQueued))
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(cen.actsDropped))
	}
	if src != nil {
		gauge(descLeases, float64(src.LeasesHeld()))
		waits := src.RecoveryWaits()
		gauge(descWaiting, float64(len(waits)))
		for _, w := range waits {
			gauge(descWaitSin, unix(w.Since), w.Module, w.Local)
		}
	}
	for d, times := range map[*prometheus.Desc]map[kept]time.Time{descLastSn: lastSnap, descLastRe: lastRest} {
		for k, t := range times {
			if !t.IsZero() {
				gauge(d, unix(t), k.module, k.local)
			}
		}
	}
}

func copyTimes(in map[kept]time.Time) map[kept]time.Time {
	out := make(map[kept]time.Time, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
