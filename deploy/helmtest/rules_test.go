package helmtest

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	rulesFile     = "../prometheus/nats-keeper-rules.yaml"
	dashboardFile = "../grafana/nats-keeper.json"
)

// prometheusOwn are series Prometheus makes itself when it scrapes: the
// rules and the dashboard may name them though no keeper exports them.
var prometheusOwn = []string{"up"}

// scheduleMetrics are the metrics of scheduled points (issue 42), exported
// by a keeper whose `policy set` takes --every. A binary without scheduled
// points exports none of them; one with them must export them all.
var scheduleMetrics = []string{
	"nats_keeper_schedule_interval_seconds",
	"nats_keeper_schedule_next_due_timestamp_seconds",
	"nats_keeper_schedule_last_point_timestamp_seconds",
	"nats_keeper_scheduled_points_total",
}

// ruleExprs parses the rules file with Prometheus's own rulefmt, which
// type-checks every expression, and returns the expressions by alert.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.LegacyValidation, parser.NewParser(parser.Options{}),
		slog.New(slog.NewTextHandler(t.Output(), nil)))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	exprs := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("rule %q in group %s is not an alert", r.Record, g.Name)
			}
			exprs[r.Alert] = r.Expr
		}
	}
	return exprs
}

// grafanaVars are what Grafana puts for its variables before Prometheus
// sees a query: the expressions parse once they are put.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	`"$job"`, `".+"`, `"$module"`, `".+"`, `"$local"`, `".+"`)

// labelValuesRE is Grafana's label_values(SELECTOR, LABEL) of a variable.
var labelValuesRE = regexp.MustCompile(`^label_values\((.+), *[a-z_]+\)$`)

// dashboardExprs reads the dashboard's JSON and returns every query of its
// panels (nested in rows or not) and of its variables, by where it is.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string                  `json:"title"`
		Type    string                  `json:"type"`
		Targets []struct{ Expr string } `json:"targets"`
		Panels  []json.RawMessage       `json:"panels"`
	}
	var d struct {
		UID        string            `json:"uid"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query json.RawMessage
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := map[string]string{}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: a panel: %v", dashboardFile, err)
			}
			for i, tg := range p.Targets {
				exprs[p.Title+" #"+string(rune('A'+i))] = tg.Expr
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		m := labelValuesRE.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s's query %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
		exprs["variable "+v.Name] = m[1]
	}
	if d.UID == "" || len(exprs) == 0 {
		t.Fatalf("%s has no uid or no query", dashboardFile)
	}
	return exprs
}

// metricNames parses expr and returns every metric name its selectors name;
// a selector without one is an error.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		t.Errorf("%s: %v\n%s", where, err, expr)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			t.Errorf("%s: a selector names no metric: %s", where, vs)
		}
		names = append(names, name)
		return nil
	})
	return names
}

func TestRulesParse(t *testing.T) {
	exprs := ruleExprs(t)
	for _, want := range []string{"NatsKeeperScheduledPointMissed", "NatsKeeperAsideWaiting", "NatsKeeperVerbsFailing",
		"NatsKeeperRecoveryWaiting", "NatsKeeperDown"} {
		if exprs[want] == "" {
			t.Errorf("no alert %s in %s", want, rulesFile)
		}
	}
	for alert, expr := range exprs {
		if len(metricNames(t, alert, expr)) == 0 {
			t.Errorf("alert %s names no metric", alert)
		}
	}
}

func TestDashboardParses(t *testing.T) {
	for where, expr := range dashboardExprs(t) {
		if len(metricNames(t, where, expr)) == 0 {
			t.Errorf("%s names no metric", where)
		}
	}
}

// TestMetricsExported: every metric the rules and the dashboard name is
// one a live keeper serves on /metrics, once it keeps something, took a
// point, set data aside and refused a verb.
func TestMetricsExported(t *testing.T) {
	k := startKeeper(t)
	k.exercise(t)
	scheduled := schedules(t)
	exported := k.exported(t)
	// The schedule's metrics are set by the keeper's next pass over the
	// schedules (every second here): a bounded wait for them, not a
	// timing assertion.
	for deadline := time.Now().Add(time.Minute); scheduled && !allOf(exported, scheduleMetrics) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		exported = k.exported(t)
	}
	for _, name := range scheduleMetrics {
		if exported[name] != scheduled {
			t.Errorf("%s exported: %v; scheduled points in this binary: %v", name, exported[name], scheduled)
		}
	}
	for what, exprs := range map[string]map[string]string{rulesFile: ruleExprs(t), dashboardFile: dashboardExprs(t)} {
		for where, expr := range exprs {
			for _, name := range metricNames(t, where, expr) {
				switch {
				case exported[name], slices.Contains(prometheusOwn, name):
				case !scheduled && slices.Contains(scheduleMetrics, name):
					t.Logf("%s: %s names %s, which a keeper exports once scheduled points are merged", what, where, name)
				default:
					t.Errorf("%s: %s names %s, which the keeper does not export", what, where, name)
				}
			}
		}
	}
}

// allOf reports whether every name is in set.
func allOf(set map[string]bool, names []string) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}
