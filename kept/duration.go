package kept

import (
	"strconv"
	"strings"
	"time"
)

// Duration is a span an operator writes, as in keep-within 30d or keep-for
// 1d12h: whole numbers, each followed by its unit, largest unit first, each
// unit at most once. The units are exactly
//
//	w = 7d, d = 24h, h = hour, m = minute, s = second
//
// (a day is 24 hours, whatever the calendar's summer time does). Months and
// years are refused: their length varies, so say 30d or 52w. "0" is zero.
// A Duration is whole seconds, from 0 to MaxDuration. It travels in JSON as
// its string; String prints the form ParseDuration reads back.
type Duration time.Duration

// MaxDuration is the longest Duration: 36500 days, a hundred years of 365.
const MaxDuration = Duration(36500 * 24 * time.Hour)

// maxDurationLen bounds the text ParseDuration reads.
const maxDurationLen = 64

var durationUnits = [...]struct {
	unit byte
	size time.Duration
}{{'w', 7 * 24 * time.Hour}, {'d', 24 * time.Hour}, {'h', time.Hour}, {'m', time.Minute}, {'s', time.Second}}

// ParseDuration reads an operator's duration (30d, 2w, 12h, 90m, 1d12h, 0).
// Its error wraps ErrBadRequest.
func ParseDuration(s string) (Duration, error) {
	switch {
	case s == "":
		return 0, Errorf(ErrBadRequest, "a duration is empty; write it as 30d, 2w, 12h, 90m or 1d12h")
	case len(s) > maxDurationLen:
		return 0, Errorf(ErrBadRequest, "a duration is %d bytes long, over the limit of %d", len(s), maxDurationLen)
	case s == "0":
		return 0, nil
	}
	var total time.Duration
	rest, next := s, 0 // next: the first unit still allowed
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, Errorf(ErrBadRequest, "duration %q: %q does not start with a number; write it as 30d, 2w, 12h, 90m or 1d12h", s, rest)
		}
		if i == len(rest) {
			return 0, Errorf(ErrBadRequest, "duration %q: %s has no unit; the units are w, d, h, m and s", s, rest)
		}
		u := strings.IndexFunc(rest[i:], func(r rune) bool { return r >= '0' && r <= '9' })
		if u < 0 {
			u = len(rest) - i
		}
		unit := rest[i : i+u]
		k := unitIndex(unit)
		switch {
		case k < 0 && calendarUnit(unit):
			return 0, Errorf(ErrBadRequest, "duration %q: %q (months or years) is refused, their length varies; say 30d or 52w", s, unit)
		case k < 0:
			return 0, Errorf(ErrBadRequest, "duration %q: unknown unit %q; the units are w (7d), d (24h), h, m and s", s, unit)
		case k < next:
			return 0, Errorf(ErrBadRequest, "duration %q: each unit once, largest first (w, d, h, m, s), as in 1d12h", s)
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		size := durationUnits[k].size
		if err != nil || n > int64(MaxDuration)/int64(size) || total+time.Duration(n)*size > time.Duration(MaxDuration) {
			return 0, Errorf(ErrBadRequest, "duration %q is over the limit of %s (a hundred years)", s, MaxDuration)
		}
		total += time.Duration(n) * size
		rest, next = rest[i+u:], k+1
	}
	return Duration(total), nil
}

// calendarUnit: a unit of months or years, as an operator may write it
// (3months, 1y, 2mo, 1M).
func calendarUnit(unit string) bool {
	switch strings.ToLower(unit) {
	case "y", "yr", "yrs", "year", "years", "mo", "mon", "month", "months":
		return true
	}
	return unit == "M"
}

func unitIndex(unit string) int {
	for k, du := range durationUnits {
		if len(unit) == 1 && unit[0] == du.unit {
			return k
		}
	}
	return -1
}

// String prints d as ParseDuration reads it: whole weeks as Nw, otherwise
// days, hours, minutes and seconds (30d, 1d12h, 1h30m). A d out of range
// (negative, over MaxDuration, or not whole seconds) prints as Go does.
func (d Duration) String() string {
	if d.check() != nil {
		return time.Duration(d).String()
	}
	if d == 0 {
		return "0"
	}
	week := durationUnits[0].size
	if time.Duration(d)%week == 0 {
		return strconv.FormatInt(int64(time.Duration(d)/week), 10) + "w"
	}
	var b strings.Builder
	rest := time.Duration(d)
	for _, du := range durationUnits[1:] {
		if n := rest / du.size; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteByte(du.unit)
			rest -= n * du.size
		}
	}
	return b.String()
}

// check: whole seconds, from 0 to MaxDuration.
func (d Duration) check() error {
	if d < 0 || d > MaxDuration || time.Duration(d)%time.Second != 0 {
		return Errorf(ErrBadRequest, "duration %s is not whole seconds from 0 to %s", time.Duration(d), MaxDuration)
	}
	return nil
}

// MarshalText is d's string, which JSON carries quoted.
func (d Duration) MarshalText() ([]byte, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads d as ParseDuration does.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Set and Type make *Duration a command-line flag value (pflag.Value).
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// Type names the flag's value in usage.
func (d *Duration) Type() string { return "duration" }
