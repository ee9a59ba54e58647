package kept

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is when a policy's scheduled points fall due: every fixed span
// (aligned on UTC midnight of 1 January, year 1, so "6h" falls at 00:00,
// 06:00, 12:00 and 18:00 UTC), or a cron spec read in a time zone.
// ParseSchedule makes one; the zero Schedule never falls due.
type Schedule struct {
	every time.Duration // > 0: a fixed span
	cron  *cronSpec     // else: a cron spec
	loc   *time.Location
	text  string
}

// MinScheduleEvery is the shortest span between scheduled points: a point's
// fingerprint names its due minute, so two due points never share a minute.
const MinScheduleEvery = time.Minute

// maxScheduleLen bounds the text ParseSchedule reads.
const maxScheduleLen = 256

// scheduleSearch bounds how far ahead Next looks: a spec that matches no
// minute in eight years (30 February) never falls due.
const scheduleSearch = 8 * 366 * 24 * time.Hour

// ParseSchedule reads a policy's every and time-zone. every is a span in
// whole minutes, as keep-within writes it (90m, 6h, 1d, 1w) or as Go writes
// it (1h30m); or a cron spec of the standard five fields, "minute hour
// day-of-month month day-of-week" (each a *, a number, a range a-b, a step
// */n or a-b/n, or a comma list of them; months jan-dec and days sun-sat by
// name too; day-of-week 0 or 7 is Sunday; when both day fields are
// restricted a day matching either is due, as cron does), or one of
// @hourly, @daily, @weekly, @monthly, @yearly. zone is an IANA time zone
// ("Europe/Paris") a cron spec is read in; "" is UTC; a span takes none.
// Its error wraps ErrBadRequest.
func ParseSchedule(every, zone string) (Schedule, error) {
	every = strings.TrimSpace(every)
	switch {
	case every == "":
		return Schedule{}, Errorf(ErrBadRequest, "every is empty; write a span (6h, 1d) or a cron spec (0 3 * * *)")
	case len(every) > maxScheduleLen || len(zone) > maxScheduleLen:
		return Schedule{}, Errorf(ErrBadRequest, "every or time-zone is over %d bytes long", maxScheduleLen)
	}
	if d, ok := parseSpan(every); ok {
		switch {
		case zone != "":
			return Schedule{}, Errorf(ErrBadRequest, "every %q is a span, which falls due on UTC multiples of itself; time-zone %q applies to a cron spec only", every, zone)
		case d < MinScheduleEvery || d%time.Minute != 0:
			return Schedule{}, Errorf(ErrBadRequest, "every %q: a span is whole minutes, at least one", every)
		case d > time.Duration(MaxDuration):
			return Schedule{}, Errorf(ErrBadRequest, "every %q is over the limit of a hundred years", every)
		}
		return Schedule{every: d, loc: time.UTC, text: every}, nil
	}
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil || strings.ContainsAny(zone, " \t") {
			return Schedule{}, Errorf(ErrBadRequest, "time-zone %q is not a known IANA time zone (such as Europe/Paris or UTC)", zone)
		}
		loc = l
	}
	c, err := parseCron(every)
	if err != nil {
		return Schedule{}, Errorf(ErrBadRequest, "every %q is neither a span (6h, 1d) nor a cron spec: %w", every, err)
	}
	return Schedule{cron: c, loc: loc, text: every}, nil
}

// parseSpan reads a span as keep-within does, else as Go's ParseDuration.
func parseSpan(s string) (time.Duration, bool) {
	if d, err := ParseDuration(s); err == nil {
		return time.Duration(d), true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	return 0, false
}

// IsZero reports the zero Schedule, which never falls due.
func (s Schedule) IsZero() bool { return s.every == 0 && s.cron == nil }

// String is the schedule as written, with its zone when it has one.
func (s Schedule) String() string {
	if s.cron != nil && s.loc != time.UTC {
		return s.text + " (" + s.loc.String() + ")"
	}
	return s.text
}

// Next is the first due time strictly after t, and false when the schedule
// falls due no more within eight years.
func (s Schedule) Next(t time.Time) (time.Time, bool) {
	switch {
	case s.every > 0:
		return t.UTC().Truncate(s.every).Add(s.every), true
	case s.cron != nil:
		return s.cron.next(t.In(s.loc))
	}
	return time.Time{}, false
}

// Prev is the last due time at or before t, and false when none is within
// eight years before it.
func (s Schedule) Prev(t time.Time) (time.Time, bool) {
	if s.every > 0 {
		return t.UTC().Truncate(s.every), true
	}
	if s.cron == nil {
		return time.Time{}, false
	}
	return s.cron.prev(t.In(s.loc))
}

// Interval is the span between the first two due times after t: what an
// alert allows between two scheduled points.
func (s Schedule) Interval(t time.Time) time.Duration {
	a, ok := s.Next(t)
	if !ok {
		return 0
	}
	b, ok := s.Next(a)
	if !ok {
		return 0
	}
	return b.Sub(a)
}

// cronSpec is the five fields of a cron spec as sets of allowed values.
type cronSpec struct {
	minute, hour, dom, month, dow uint64 // bit n set: n is allowed
	domAny, dowAny                bool   // the field was *
}

var cronDescriptors = map[string]string{
	"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
	"@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
}

var (
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dayNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

// cronField is one field's name, range and names (names[i] is lo+i).
type cronField struct {
	name   string
	lo, hi int
	names  []string
}

var cronFields = [5]cronField{
	{"minute", 0, 59, nil}, {"hour", 0, 23, nil}, {"day-of-month", 1, 31, nil},
	{"month", 1, 12, monthNames}, {"day-of-week", 0, 7, dayNames},
}

func parseCron(spec string) (*cronSpec, error) {
	if d, ok := cronDescriptors[strings.ToLower(spec)]; ok {
		spec = d
	} else if strings.HasPrefix(spec, "@") {
		return nil, fmt.Errorf("%s is not one of @hourly, @daily, @weekly, @monthly, @yearly", spec)
	}
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return nil, fmt.Errorf("a cron spec has 5 fields (minute hour day-of-month month day-of-week), this one %d", len(fields))
	}
	var sets [5]uint64
	for i, f := range fields {
		set, err := parseCronField(f, cronFields[i])
		if err != nil {
			return nil, err
		}
		sets[i] = set
	}
	if sets[4]&(1<<7) != 0 { // 7 is Sunday, as 0
		sets[4] = sets[4]&^(1<<7) | 1
	}
	return &cronSpec{minute: sets[0], hour: sets[1], dom: sets[2], month: sets[3], dow: sets[4],
		domAny: fields[2] == "*", dowAny: fields[4] == "*"}, nil
}

// parseCronField reads one field: a comma list of *, n, a-b, each with an
// optional /step.
func parseCronField(s string, f cronField) (uint64, error) {
	var set uint64
	for part := range strings.SplitSeq(s, ",") {
		rng, stepText, stepped := strings.Cut(part, "/")
		step := 1
		if stepped {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || n > f.hi-f.lo+1 {
				return 0, fmt.Errorf("%s %q: the step %q is not a whole number from 1 to %d", f.name, part, stepText, f.hi-f.lo+1)
			}
			step = n
		}
		lo, hi := f.lo, f.hi
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if lo, err = cronValue(a, f); err != nil {
				return 0, err
			}
			hi = lo
			if isRange {
				if hi, err = cronValue(b, f); err != nil {
					return 0, err
				}
			} else if stepped {
				hi = f.hi // n/step: from n to the end, as cron reads it
			}
			if hi < lo {
				return 0, fmt.Errorf("%s %q: the range runs backwards", f.name, part)
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// cronValue reads one number or name of field f.
func cronValue(s string, f cronField) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.lo + i, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < f.lo || n > f.hi || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%s %q is not a whole number from %d to %d", f.name, s, f.lo, f.hi)
	}
	return n, nil
}

func has(set uint64, v int) bool { return set&(1<<v) != 0 }

// dayDue reports whether t's day is a due day: both day fields restricted
// match either, as cron does; otherwise the restricted one must match.
func (c *cronSpec) dayDue(t time.Time) bool {
	dom, dow := has(c.dom, t.Day()), has(c.dow, int(t.Weekday()))
	if !c.domAny && !c.dowAny {
		return dom || dow
	}
	return dom && dow
}

// next is the first due minute strictly after t, in t's zone. It walks
// whole days to the next due day, then hours and minutes within it; a
// wall-clock minute a summer-time change skips is not due that day.
func (c *cronSpec) next(t time.Time) (time.Time, bool) {
	loc := t.Location()
	end := t.Add(scheduleSearch)
	t = t.Truncate(time.Minute).Add(time.Minute)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	for !day.After(end) {
		if has(c.month, int(day.Month())) && c.dayDue(day) {
			if at, ok := c.inDay(day, t); ok {
				return at, true
			}
		}
		day = time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
	}
	return time.Time{}, false
}

// prev is the last due minute at or before t, in t's zone, walking whole
// days back as next walks them forward.
func (c *cronSpec) prev(t time.Time) (time.Time, bool) {
	loc := t.Location()
	end := t.Add(-scheduleSearch)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	for !day.Before(end) {
		if has(c.month, int(day.Month())) && c.dayDue(day) {
			if at, ok := c.lastInDay(day, t); ok {
				return at, true
			}
		}
		day = time.Date(day.Year(), day.Month(), day.Day()-1, 0, 0, 0, 0, loc)
	}
	return time.Time{}, false
}

// inDay is the first due minute of day's date at or after from.
func (c *cronSpec) inDay(day, from time.Time) (time.Time, bool) {
	for h := range 24 {
		for mi := range 60 {
			if at, ok := c.dueAt(day, h, mi); ok && !at.Before(from) {
				return at, true
			}
		}
	}
	return time.Time{}, false
}

// lastInDay is the last due minute of day's date at or before until.
func (c *cronSpec) lastInDay(day, until time.Time) (time.Time, bool) {
	for h := 23; h >= 0; h-- {
		for mi := 59; mi >= 0; mi-- {
			if at, ok := c.dueAt(day, h, mi); ok && !at.After(until) {
				return at, true
			}
		}
	}
	return time.Time{}, false
}

// dueAt is day's date at h:mi when the spec allows that hour and minute and
// the wall clock shows it that day (summer time skips some).
func (c *cronSpec) dueAt(day time.Time, h, mi int) (time.Time, bool) {
	if !has(c.hour, h) || !has(c.minute, mi) {
		return time.Time{}, false
	}
	y, m, d := day.Date()
	at := time.Date(y, m, d, h, mi, 0, 0, day.Location())
	return at, at.Hour() == h && at.Minute() == mi
}

// ScheduledPrefix begins the fingerprint of every scheduled point.
const ScheduledPrefix = "sched-"

// ScheduledFingerprint is the fingerprint of the point due at due:
// sched-<UTC yyyymmddThhmm>, so every keeper names one due point alike.
func ScheduledFingerprint(due time.Time) string {
	return ScheduledPrefix + due.UTC().Format("20060102T1504")
}

// Scheduled is the schedule of one kept data, as list-kept shows it and as
// the keepers take it.
type Scheduled struct {
	Module   string        `json:"module"`
	Local    string        `json:"local"`
	Policy   string        `json:"policy"`              // the index key of the policy that schedules it
	Every    string        `json:"every"`               // the policy's every
	TimeZone string        `json:"time-zone,omitempty"` // the policy's time zone
	Form     int           `json:"form"`                // the form its points are taken at
	Interval time.Duration `json:"interval"`            // between the next two due times (nanoseconds)
	Due      time.Time     `json:"due,omitzero"`        // the latest due time at or before now
	NextDue  time.Time     `json:"next-due,omitzero"`   // the first due time after now
	Newest   *time.Time    `json:"newest,omitempty"`    // when its newest scheduled point was taken
	// Taken reports whether the point due at Due is in the index.
	Taken bool `json:"taken"`
}

// Fingerprint is the fingerprint of the point due at s.Due.
func (s Scheduled) Fingerprint() string { return ScheduledFingerprint(s.Due) }
