package kept

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxKeepCount bounds each count of a Policy.
const MaxKeepCount = 100_000

// Policy is what prune-kept keeps of each kept data's points, as restic's
// forget does. The rules combine with OR: a point stays when any rule keeps
// it. Decide says exactly what each rule means.
type Policy struct {
	KeepLast    int      `json:"keep-last,omitempty"`    // the N newest points
	KeepWithin  Duration `json:"keep-within,omitempty"`  // every point taken at most this before the newest
	KeepDaily   int      `json:"keep-daily,omitempty"`   // the newest point of each of the last N days that hold one (UTC)
	KeepWeekly  int      `json:"keep-weekly,omitempty"`  // … of each of the last N ISO weeks that hold one
	KeepMonthly int      `json:"keep-monthly,omitempty"` // … of each of the last N months that hold one
	// Every, when set, schedules points: the keepers of the bus take one
	// at form Form, fingerprint sched-<UTC yyyymmddThhmm of its due time>,
	// each time it falls due (ParseSchedule says what it may be), and
	// prune by the keep rules after each. TimeZone is the IANA zone a cron
	// spec is read in; "" is UTC.
	Every    string `json:"every,omitempty"`
	TimeZone string `json:"time-zone,omitempty"`
	Form     int    `json:"form,omitempty"`
}

// Empty reports a policy with no keep rule, which prune refuses (a
// schedule alone keeps nothing).
func (p Policy) Empty() bool {
	p.Every, p.TimeZone, p.Form = "", "", 0
	return p == Policy{}
}

// Schedule is the policy's schedule; the zero Schedule without every.
func (p Policy) Schedule() (Schedule, error) {
	if p.Every == "" {
		return Schedule{}, nil
	}
	return ParseSchedule(p.Every, p.TimeZone)
}

// Check refuses an empty policy, a negative count, a count over MaxKeepCount
// and a keep-within out of range. Its error wraps ErrBadRequest.
func (p Policy) Check() error {
	if p.Empty() {
		return Errorf(ErrBadRequest, "no policy: give at least one of keep-last, keep-within, keep-daily, keep-weekly, keep-monthly")
	}
	for _, c := range p.counts() {
		if c.n < 0 || c.n > MaxKeepCount {
			return Errorf(ErrBadRequest, "%s %d is outside 0..%d", c.rule, c.n, MaxKeepCount)
		}
	}
	if err := p.KeepWithin.check(); err != nil {
		return Errorf(ErrBadRequest, "keep-within: %w", err)
	}
	return p.checkSchedule()
}

// checkSchedule refuses an every that does not parse, and a time-zone or
// form without every.
func (p Policy) checkSchedule() error {
	if p.Every == "" && (p.TimeZone != "" || p.Form != 0) {
		return Errorf(ErrBadRequest, "time-zone and form are of scheduled points; give every too")
	}
	if p.Form < 0 || p.Form > MaxForm {
		return Errorf(ErrBadRequest, "form %d is outside 0..%d", p.Form, MaxForm)
	}
	_, err := p.Schedule()
	return err
}

type ruleCount struct {
	rule string
	n    int
}

func (p Policy) counts() []ruleCount {
	return []ruleCount{{"keep-last", p.KeepLast}, {"keep-daily", p.KeepDaily}, {"keep-weekly", p.KeepWeekly}, {"keep-monthly", p.KeepMonthly}}
}

// String is the policy in a sentence: "keep-last 3, keep-daily 7".
func (p Policy) String() string {
	var rules []string
	if p.KeepLast != 0 {
		rules = append(rules, fmt.Sprintf("keep-last %d", p.KeepLast))
	}
	if p.KeepWithin != 0 {
		rules = append(rules, "keep-within "+p.KeepWithin.String())
	}
	for _, c := range p.counts()[1:] {
		if c.n != 0 {
			rules = append(rules, fmt.Sprintf("%s %d", c.rule, c.n))
		}
	}
	if len(rules) == 0 {
		rules = append(rules, "no keep rule")
	}
	if p.Every != "" {
		sched := "every " + p.Every
		if p.TimeZone != "" {
			sched += " (" + p.TimeZone + ")"
		}
		rules = append(rules, fmt.Sprintf("%s at form %d", sched, p.Form))
	}
	if p == (Policy{}) {
		return "no policy"
	}
	return strings.Join(rules, ", ")
}

// PruneDecision is what prune does with one point, and why.
type PruneDecision struct {
	Point   Point    `json:"point"`   // the point decided on
	Keep    bool     `json:"keep"`    // true: it stays; false: it is (or, in a dry run, would be) removed
	Reasons []string `json:"reasons"` // what keeps it; for a removed point, "no rule keeps it"
}

// NoRuleKeeps is the one reason of a removed point.
const NoRuleKeeps = "no rule keeps it"

// String is one line of a dry run: keep or remove, taken, dir, reasons.
func (d PruneDecision) String() string {
	verb := "remove"
	if d.Keep {
		verb = "keep"
	}
	return fmt.Sprintf("%-6s  %s  %s  %s", verb, d.Point.Taken.UTC().Format(time.RFC3339), d.Point.Dir, strings.Join(d.Reasons, ", "))
}

// Decide says of every point whether prune keeps or removes it, and why.
// Points may be of several kept data: each (module, local) is decided on its
// own. The answer is sorted by module, local, then newest first (by Taken;
// equal times by Dir). Within one kept data, walking newest first:
//
//   - "newest": the newest point is always kept.
//   - "keep-last N": the N newest points.
//   - "keep-within 30d": a point at most that much older than the newest
//     point of its kept data (newest.Taken - Taken <= within), not than now.
//   - "keep-daily 2026-11-30", "keep-weekly 2026-W48", "keep-monthly 2026-11":
//     the newest point of each of the last N UTC calendar days, ISO weeks
//     (Monday to Sunday, labelled with the ISO year) or months that hold a
//     point; a bucket with no point does not count.
//   - "keep-until 2026-12-31T00:00:00Z": the point's own keep-until is after now.
//   - protected[Point.Dir], as given ("journal: …", "lease: …"): a point an
//     unfinished journal or a restore in flight names.
//
// Every rule that keeps a point is named, in that order. A point no rule
// keeps is removed with the one reason NoRuleKeeps. A policy Check refuses
// (the empty one first) removes nothing: every point is kept, with the
// refusal as its reason.
//
// A dry run, one PruneDecision.String a line, as restic's forget shows it:
//
//	billing/ledger: keep-last 2, keep-daily 3
//	keep    2026-12-01T09:00:00Z  points/billing/ledger/f3-9f2c  newest, keep-last 2, keep-daily 2026-12-01
//	keep    2026-12-01T08:00:00Z  points/billing/ledger/f3-77aa  keep-last 2
//	keep    2026-11-30T23:00:00Z  points/billing/ledger/f3-5e01  keep-daily 2026-11-30, journal: restore of billing.ledger unfinished
//	remove  2026-11-30T07:00:00Z  points/billing/ledger/f3-41bd  no rule keeps it
//	keep    2026-11-28T12:00:00Z  points/billing/ledger/f3-0c3a  keep-daily 2026-11-28
func Decide(points []Point, p Policy, now time.Time, protected map[string]string) []PruneDecision {
	sorted := slices.Clone(points)
	slices.SortStableFunc(sorted, func(a, b Point) int {
		return cmp.Or(cmp.Compare(a.Module, b.Module), cmp.Compare(a.Local, b.Local), b.Taken.Compare(a.Taken), cmp.Compare(a.Dir, b.Dir))
	})
	refused := p.Check()
	out := make([]PruneDecision, 0, len(sorted))
	for start := 0; start < len(sorted); {
		end := start + 1
		for end < len(sorted) && sorted[end].Module == sorted[start].Module && sorted[end].Local == sorted[start].Local {
			end++
		}
		for _, pt := range sorted[start:end] {
			if refused != nil {
				out = append(out, PruneDecision{Point: pt, Keep: true, Reasons: []string{"nothing removed: " + refused.Error()}})
			} else {
				out = append(out, PruneDecision{Point: pt})
			}
		}
		if refused == nil {
			decideOne(out[start:end], p, now, protected)
		}
		start = end
	}
	return out
}

// calendar buckets: a rule, its count, and a point's bucket label.
var buckets = [...]struct {
	rule  string
	count func(Policy) int
	label func(time.Time) string
}{
	{"keep-daily", func(p Policy) int { return p.KeepDaily }, func(t time.Time) string { return t.Format("2006-01-02") }},
	{"keep-weekly", func(p Policy) int { return p.KeepWeekly }, func(t time.Time) string {
		y, w := t.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, w)
	}},
	{"keep-monthly", func(p Policy) int { return p.KeepMonthly }, func(t time.Time) string { return t.Format("2006-01") }},
}

// decideOne decides the points of one kept data, ds newest first.
func decideOne(ds []PruneDecision, p Policy, now time.Time, protected map[string]string) {
	newest := ds[0].Point.Taken
	seen := make([]string, len(buckets)) // the last bucket label kept, per rule
	counted := make([]int, len(buckets))
	for i := range ds {
		d := &ds[i]
		t := d.Point.Taken.UTC()
		if i == 0 {
			d.Reasons = append(d.Reasons, "newest")
		}
		if i < p.KeepLast {
			d.Reasons = append(d.Reasons, fmt.Sprintf("keep-last %d", p.KeepLast))
		}
		if p.KeepWithin > 0 && newest.Sub(d.Point.Taken) <= time.Duration(p.KeepWithin) {
			d.Reasons = append(d.Reasons, "keep-within "+p.KeepWithin.String())
		}
		for k, b := range buckets {
			if label := b.label(t); counted[k] < b.count(p) && label != seen[k] {
				d.Reasons = append(d.Reasons, b.rule+" "+label)
				seen[k] = label
				counted[k]++
			}
		}
		if u := d.Point.KeepUntil; u != nil && now.Before(*u) {
			d.Reasons = append(d.Reasons, "keep-until "+u.UTC().Format(time.RFC3339))
		}
		if why, ok := protected[d.Point.Dir]; ok {
			d.Reasons = append(d.Reasons, cmp.Or(why, "protected"))
		}
		d.Keep = len(d.Reasons) > 0
		if !d.Keep {
			d.Reasons = []string{NoRuleKeeps}
		}
	}
}
