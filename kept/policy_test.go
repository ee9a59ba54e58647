package kept_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// now is the fixed clock of every Decide test.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// pt is a point of module/local taken at taken (RFC 3339, any zone); Dir
// names it by its UTC time.
func pt(module, local, taken string) kept.Point {
	t := at(taken)
	return kept.Point{Module: module, Local: local, Form: 3, Fingerprint: "x", Taken: t,
		Dir: fmt.Sprintf("points/%s/%s/f3-%s", module, local, t.UTC().Format("20060102T150405"))}
}

func ledger(taken ...string) []kept.Point {
	var ps []kept.Point
	for _, s := range taken {
		ps = append(ps, pt("billing", "ledger", s))
	}
	return ps
}

// lines renders decisions as "<dir tail> keep|remove: <reasons>".
func lines(ds []kept.PruneDecision) []string {
	var out []string
	for _, d := range ds {
		verb := "remove"
		if d.Keep {
			verb = "keep"
		}
		out = append(out, fmt.Sprintf("%s/%s %s %s: %s", d.Point.Module, d.Point.Local,
			d.Point.Taken.UTC().Format("2006-01-02T15:04"), verb, strings.Join(d.Reasons, ", ")))
	}
	return out
}

func TestDecide(t *testing.T) {
	until := func(p kept.Point, u string) kept.Point { v := at(u); p.KeepUntil = &v; return p }
	cases := []struct {
		name      string
		points    []kept.Point
		policy    kept.Policy
		protected map[string]string
		want      []string
	}{
		{"keep-last alone", ledger("2026-11-27T10:00:00Z", "2026-12-01T09:00:00Z", "2026-11-28T10:00:00Z", "2026-11-30T10:00:00Z", "2026-11-29T10:00:00Z"),
			kept.Policy{KeepLast: 3}, nil, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-last 3",
				"billing/ledger 2026-11-30T10:00 keep: keep-last 3",
				"billing/ledger 2026-11-29T10:00 keep: keep-last 3",
				"billing/ledger 2026-11-28T10:00 remove: no rule keeps it",
				"billing/ledger 2026-11-27T10:00 remove: no rule keeps it",
			}},
		// The newest point is a year old: keep-within counts from it, not now.
		{"keep-within from the newest point", ledger("2025-12-01T00:00:00Z", "2025-11-15T00:00:00Z", "2025-11-01T00:00:00Z", "2025-10-31T23:59:59Z"),
			kept.Policy{KeepWithin: kept.Duration(30 * day)}, nil, []string{
				"billing/ledger 2025-12-01T00:00 keep: newest, keep-within 30d",
				"billing/ledger 2025-11-15T00:00 keep: keep-within 30d",
				"billing/ledger 2025-11-01T00:00 keep: keep-within 30d", // exactly 30d: kept
				"billing/ledger 2025-10-31T23:59 remove: no rule keeps it",
			}},
		{"keep-within 1h", ledger("2026-12-01T09:00:00Z", "2026-12-01T08:30:00Z", "2026-12-01T07:59:00Z"),
			kept.Policy{KeepWithin: kept.Duration(time.Hour)}, nil, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-within 1h",
				"billing/ledger 2026-12-01T08:30 keep: keep-within 1h",
				"billing/ledger 2026-12-01T07:59 remove: no rule keeps it",
			}},
		// Several points a day: only each day's newest; across Nov 30 / Dec 1;
		// a point taken at 01:00+02:00 on Dec 1 is Nov 30 in UTC.
		{"keep-daily across a month end", append(ledger("2026-12-01T09:00:00Z", "2026-12-01T08:00:00Z", "2026-11-30T07:00:00Z", "2026-11-29T10:00:00Z", "2026-11-28T10:00:00Z"),
			pt("billing", "ledger", "2026-12-01T01:00:00+02:00")),
			kept.Policy{KeepDaily: 3}, nil, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-daily 2026-12-01",
				"billing/ledger 2026-12-01T08:00 remove: no rule keeps it",
				"billing/ledger 2026-11-30T23:00 keep: keep-daily 2026-11-30",
				"billing/ledger 2026-11-30T07:00 remove: no rule keeps it",
				"billing/ledger 2026-11-29T10:00 keep: keep-daily 2026-11-29",
				"billing/ledger 2026-11-28T10:00 remove: no rule keeps it",
			}},
		// Days with no point do not count.
		{"keep-daily across a year end, with gaps", ledger("2027-01-01T00:30:00Z", "2026-12-31T23:30:00Z", "2026-12-31T10:00:00Z", "2026-12-20T10:00:00Z", "2026-12-19T10:00:00Z"),
			kept.Policy{KeepDaily: 3}, nil, []string{
				"billing/ledger 2027-01-01T00:30 keep: newest, keep-daily 2027-01-01",
				"billing/ledger 2026-12-31T23:30 keep: keep-daily 2026-12-31",
				"billing/ledger 2026-12-31T10:00 remove: no rule keeps it",
				"billing/ledger 2026-12-20T10:00 keep: keep-daily 2026-12-20",
				"billing/ledger 2026-12-19T10:00 remove: no rule keeps it",
			}},
		// Monday 2024-12-30 is in ISO 2025-W01; Sunday 2024-12-29 in 2024-W52.
		{"keep-weekly across a year end", ledger("2025-01-02T10:00:00Z", "2024-12-30T00:00:00Z", "2024-12-29T23:59:00Z", "2024-12-23T00:00:00Z", "2024-12-22T10:00:00Z", "2024-12-15T10:00:00Z"),
			kept.Policy{KeepWeekly: 3}, nil, []string{
				"billing/ledger 2025-01-02T10:00 keep: newest, keep-weekly 2025-W01",
				"billing/ledger 2024-12-30T00:00 remove: no rule keeps it",
				"billing/ledger 2024-12-29T23:59 keep: keep-weekly 2024-W52",
				"billing/ledger 2024-12-23T00:00 remove: no rule keeps it",
				"billing/ledger 2024-12-22T10:00 keep: keep-weekly 2024-W51",
				"billing/ledger 2024-12-15T10:00 remove: no rule keeps it",
			}},
		// A week spanning two months: Mon 2026-11-30 and Tue 2026-12-01 are both 2026-W49.
		{"keep-weekly across a month end", ledger("2026-12-01T09:00:00Z", "2026-11-30T09:00:00Z", "2026-11-29T09:00:00Z"),
			kept.Policy{KeepWeekly: 5}, nil, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-weekly 2026-W49",
				"billing/ledger 2026-11-30T09:00 remove: no rule keeps it",
				"billing/ledger 2026-11-29T09:00 keep: keep-weekly 2026-W48",
			}},
		{"keep-monthly across a year end, with gaps", ledger("2027-01-05T10:00:00Z", "2026-12-31T10:00:00Z", "2026-12-01T10:00:00Z", "2026-06-30T10:00:00Z", "2026-05-01T10:00:00Z"),
			kept.Policy{KeepMonthly: 3}, nil, []string{
				"billing/ledger 2027-01-05T10:00 keep: newest, keep-monthly 2027-01",
				"billing/ledger 2026-12-31T10:00 keep: keep-monthly 2026-12",
				"billing/ledger 2026-12-01T10:00 remove: no rule keeps it",
				"billing/ledger 2026-06-30T10:00 keep: keep-monthly 2026-06",
				"billing/ledger 2026-05-01T10:00 remove: no rule keeps it",
			}},
		{"rules combine with OR", ledger("2026-12-01T09:00:00Z", "2026-12-01T08:00:00Z", "2026-11-30T10:00:00Z", "2026-11-29T10:00:00Z", "2026-10-15T10:00:00Z", "2026-10-01T10:00:00Z", "2026-09-01T10:00:00Z"),
			kept.Policy{KeepLast: 2, KeepWithin: kept.Duration(36 * time.Hour), KeepDaily: 2, KeepWeekly: 2, KeepMonthly: 2}, nil, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-last 2, keep-within 1d12h, keep-daily 2026-12-01, keep-weekly 2026-W49, keep-monthly 2026-12",
				"billing/ledger 2026-12-01T08:00 keep: keep-last 2, keep-within 1d12h",
				"billing/ledger 2026-11-30T10:00 keep: keep-within 1d12h, keep-daily 2026-11-30, keep-monthly 2026-11",
				"billing/ledger 2026-11-29T10:00 keep: keep-weekly 2026-W48",
				"billing/ledger 2026-10-15T10:00 remove: no rule keeps it",
				"billing/ledger 2026-10-01T10:00 remove: no rule keeps it",
				"billing/ledger 2026-09-01T10:00 remove: no rule keeps it",
			}},
		// keep-until protects while now < keep-until, whatever the policy.
		{"keep-for", []kept.Point{pt("billing", "ledger", "2026-12-01T09:00:00Z"),
			until(pt("billing", "ledger", "2026-11-01T00:00:00Z"), "2026-12-31T00:00:00Z"),
			until(pt("billing", "ledger", "2026-10-01T00:00:00Z"), "2026-12-01T12:00:00Z"),
			until(pt("billing", "ledger", "2026-09-01T00:00:00Z"), "2026-11-01T00:00:00+01:00")},
			kept.Policy{KeepLast: 1}, nil, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-last 1",
				"billing/ledger 2026-11-01T00:00 keep: keep-until 2026-12-31T00:00:00Z",
				"billing/ledger 2026-10-01T00:00 remove: no rule keeps it", // keep-until is now: no longer
				"billing/ledger 2026-09-01T00:00 remove: no rule keeps it",
			}},
		// keep-monthly 1 keeps only the newest: the others stay for a journal or a lease.
		{"protected points", ledger("2026-12-01T09:00:00Z", "2026-11-30T09:00:00Z", "2026-11-29T09:00:00Z", "2026-11-28T09:00:00Z"),
			kept.Policy{KeepMonthly: 1}, map[string]string{
				"points/billing/ledger/f3-20261130T090000": "journal: restore of billing.ledger unfinished",
				"points/billing/ledger/f3-20261128T090000": "lease: keeper k2 restoring",
				"points/billing/ledger/f3-20261201T090000": "lease: keeper k1 restoring",
				"points/billing/audit/f3-20261129T090000":  "journal: another kept data's",
			}, []string{
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-monthly 2026-12, lease: keeper k1 restoring",
				"billing/ledger 2026-11-30T09:00 keep: journal: restore of billing.ledger unfinished",
				"billing/ledger 2026-11-29T09:00 remove: no rule keeps it",
				"billing/ledger 2026-11-28T09:00 keep: lease: keeper k2 restoring",
			}},
		// Each kept data has its own newest, buckets and keep-within; the
		// answer is sorted by module, local, then newest first.
		{"several kept data, independently", []kept.Point{
			pt("crm", "contacts", "2026-11-01T10:00:00Z"), pt("billing", "ledger", "2026-12-01T09:00:00Z"),
			pt("billing", "audit", "2026-06-01T10:00:00Z"), pt("billing", "ledger", "2026-12-01T08:00:00Z"),
			pt("billing", "audit", "2026-06-01T09:00:00Z"), pt("crm", "contacts", "2026-10-01T10:00:00Z"),
			pt("billing", "audit", "2026-05-30T10:00:00Z")},
			kept.Policy{KeepDaily: 1, KeepWithin: kept.Duration(time.Hour)}, nil, []string{
				"billing/audit 2026-06-01T10:00 keep: newest, keep-within 1h, keep-daily 2026-06-01",
				"billing/audit 2026-06-01T09:00 keep: keep-within 1h",
				"billing/audit 2026-05-30T10:00 remove: no rule keeps it",
				"billing/ledger 2026-12-01T09:00 keep: newest, keep-within 1h, keep-daily 2026-12-01",
				"billing/ledger 2026-12-01T08:00 keep: keep-within 1h",
				"crm/contacts 2026-11-01T10:00 keep: newest, keep-within 1h, keep-daily 2026-11-01",
				"crm/contacts 2026-10-01T10:00 remove: no rule keeps it",
			}},
		{"a lone point is kept", ledger("2020-01-01T00:00:00Z"), kept.Policy{KeepWithin: kept.Duration(time.Hour)}, nil, []string{
			"billing/ledger 2020-01-01T00:00 keep: newest, keep-within 1h",
		}},
		{"no points", nil, kept.Policy{KeepLast: 1}, nil, nil},
		// A policy Check refuses removes nothing, even if the caller did not check.
		{"no policy removes nothing", ledger("2026-12-01T09:00:00Z", "2026-11-01T09:00:00Z"), kept.Policy{}, nil, []string{
			"billing/ledger 2026-12-01T09:00 keep: nothing removed: no policy: give at least one of keep-last, keep-within, keep-daily, keep-weekly, keep-monthly",
			"billing/ledger 2026-11-01T09:00 keep: nothing removed: no policy: give at least one of keep-last, keep-within, keep-daily, keep-weekly, keep-monthly",
		}},
		{"a refused policy removes nothing", ledger("2026-11-01T09:00:00Z"), kept.Policy{KeepLast: -1}, nil, []string{
			"billing/ledger 2026-11-01T09:00 keep: nothing removed: keep-last -1 is outside 0..100000",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]kept.Point(nil), c.points...)
			got := lines(kept.Decide(c.points, c.policy, now, c.protected))
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("Decide, %s:\n got: %s\nwant: %s", c.policy, strings.Join(got, "\n      "), strings.Join(c.want, "\n      "))
			}
			for i := range in {
				if in[i].Dir != c.points[i].Dir {
					t.Fatalf("Decide reordered its input")
				}
			}
		})
	}
}

// TestDecideDocExample: the dry run in Decide's doc comment is what Decide says.
func TestDecideDocExample(t *testing.T) {
	ps := ledger("2026-11-30T07:00:00Z", "2026-12-01T09:00:00Z", "2026-11-28T12:00:00Z", "2026-11-30T23:00:00Z", "2026-12-01T08:00:00Z")
	for i, fp := range map[int]string{0: "41bd", 1: "9f2c", 2: "0c3a", 3: "5e01", 4: "77aa"} {
		ps[i].Dir = "points/billing/ledger/f3-" + fp
	}
	p := kept.Policy{KeepLast: 2, KeepDaily: 3}
	got := []string{"billing/ledger: " + p.String()}
	for _, d := range kept.Decide(ps, p, now, map[string]string{"points/billing/ledger/f3-5e01": "journal: restore of billing.ledger unfinished"}) {
		got = append(got, d.String())
	}
	want := `billing/ledger: keep-last 2, keep-daily 3
keep    2026-12-01T09:00:00Z  points/billing/ledger/f3-9f2c  newest, keep-last 2, keep-daily 2026-12-01
keep    2026-12-01T08:00:00Z  points/billing/ledger/f3-77aa  keep-last 2
keep    2026-11-30T23:00:00Z  points/billing/ledger/f3-5e01  keep-daily 2026-11-30, journal: restore of billing.ledger unfinished
remove  2026-11-30T07:00:00Z  points/billing/ledger/f3-41bd  no rule keeps it
keep    2026-11-28T12:00:00Z  points/billing/ledger/f3-0c3a  keep-daily 2026-11-28`
	if g := strings.Join(got, "\n"); g != want {
		t.Errorf("got:\n%s\nwant:\n%s", g, want)
	}
}

func TestPolicyCheck(t *testing.T) {
	for _, c := range []struct {
		p    kept.Policy
		says string // "" for a policy Check passes
	}{
		{kept.Policy{}, "no policy"},
		{kept.Policy{KeepLast: 1}, ""},
		{kept.Policy{KeepWithin: kept.Duration(time.Hour)}, ""},
		{kept.Policy{KeepMonthly: kept.MaxKeepCount}, ""},
		{kept.Policy{KeepLast: -1}, "keep-last -1 is outside 0..100000"},
		{kept.Policy{KeepDaily: 7, KeepWeekly: -3}, "keep-weekly -3 is outside"},
		{kept.Policy{KeepMonthly: kept.MaxKeepCount + 1}, "keep-monthly 100001 is outside"},
		{kept.Policy{KeepWithin: -kept.Duration(time.Hour)}, "keep-within: duration -1h0m0s is not whole seconds from 0 to 36500d"},
		{kept.Policy{KeepWithin: kept.MaxDuration + 1}, "keep-within: duration"},
		{kept.Policy{KeepWithin: kept.Duration(time.Millisecond)}, "not whole seconds"},
	} {
		err := c.p.Check()
		if c.says == "" && err != nil || c.says != "" && (!errors.Is(err, kept.ErrBadRequest) || !strings.Contains(fmt.Sprint(err), c.says)) {
			t.Errorf("%+v.Check() = %v; want %q", c.p, err, c.says)
		}
		if c.p.Empty() != (c.p == kept.Policy{}) {
			t.Errorf("%+v.Empty() = %v", c.p, c.p.Empty())
		}
	}
}

func TestPolicyStringAndJSON(t *testing.T) {
	p := kept.Policy{KeepLast: 3, KeepWithin: kept.Duration(30 * day), KeepDaily: 7, KeepWeekly: 4, KeepMonthly: 12}
	if s := p.String(); s != "keep-last 3, keep-within 30d, keep-daily 7, keep-weekly 4, keep-monthly 12" {
		t.Errorf("String: %q", s)
	}
	if s := (kept.Policy{KeepLast: 3, KeepDaily: 7}).String(); s != "keep-last 3, keep-daily 7" {
		t.Errorf("String: %q", s)
	}
	if s := (kept.Policy{}).String(); s != "no policy" {
		t.Errorf("String of the empty policy: %q", s)
	}
	b, err := json.Marshal(p)
	if want := `{"keep-last":3,"keep-within":"30d","keep-daily":7,"keep-weekly":4,"keep-monthly":12}`; err != nil || string(b) != want {
		t.Fatalf("marshal: %s, %v; want %s", b, err, want)
	}
	var back kept.Policy
	if err := json.Unmarshal(b, &back); err != nil || back != p {
		t.Fatalf("unmarshal: %+v, %v", back, err)
	}
	if b, _ := json.Marshal(kept.Policy{KeepDaily: 2}); string(b) != `{"keep-daily":2}` {
		t.Errorf("marshal leaves out zero rules: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"keep-within":"1y"}`), &back); !errors.Is(err, kept.ErrBadRequest) {
		t.Errorf("keep-within 1y: %v; want a bad request", err)
	}
}
