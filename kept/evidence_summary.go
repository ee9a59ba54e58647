package kept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// checkTitles are the checks as summary.md names them.
var checkTitles = map[string]string{
	CheckPointVerified: "the point verified before anything was touched",
	CheckAsideVerified: "the aside is complete and verifies",
	CheckNoWritesAfter: "no live stream took a message after its aside began",
	CheckStreams:       "each restored stream is as its manifest says",
	CheckConsumers:     "each consumer is at its recorded position, its configuration unchanged",
	CheckKVKeys:        "the KV keys count as in the point",
	CheckObjects:       "the objects count as in the point",
	CheckLogical:       "each key written logically holds the point's value",
}

// Summary is the report as summary.md holds it: Markdown a person reads.
func (ev *Evidence) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Restore evidence: %s\n\n", ev.Verdict)
	fmt.Fprintf(&b, "%s/%s, %s", ev.Module, ev.Local, ev.Kind)
	if ev.Point != "" {
		fmt.Fprintf(&b, ", from `%s`", ev.Point)
	}
	if ev.Aside != "" {
		fmt.Fprintf(&b, ", live data set aside as `%s`", ev.Aside)
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "Asked by %s, why: %s. From %s to %s", orNone(ev.Caller), orNone(ev.Why),
		ev.Started.Format(time.RFC3339), ev.Ended.Format(time.RFC3339))
	if ev.Recovered {
		b.WriteString(", finished by a keeper that started again")
	}
	fmt.Fprintf(&b, ".\n\n%s.\n\n", ev.Said)

	b.WriteString("| check | verdict | figures |\n|---|---|---|\n")
	for _, c := range ev.Checks {
		title := checkTitles[c.Name]
		if title == "" {
			title = c.Name
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(title), c.Verdict, cell(c.Said))
	}
	for _, c := range ev.Checks {
		writeItems(&b, c)
	}
	if len(ev.Steps) > 0 {
		b.WriteString("\n## Steps\n\n| step | started | ended | seconds |\n|---|---|---|---|\n")
		for _, s := range ev.Steps {
			fmt.Fprintf(&b, "| %s | %s | %s | %.3f |\n", s.Step, s.Started.Format(time.RFC3339Nano),
				s.Ended.Format(time.RFC3339Nano), s.Seconds)
		}
	}
	return b.String()
}

// writeItems lists a check's streams or consumers, one table row each.
func writeItems(b *strings.Builder, c Check) {
	switch {
	case len(c.Streams) > 0:
		fmt.Fprintf(b, "\n## %s\n\n| stream | verdict | want | got | note |\n|---|---|---|---|---|\n", c.Name)
		for _, s := range c.Streams {
			want, got := s.wantGot()
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", cell(s.Stream), s.Verdict, want, got, cell(s.Note))
		}
	case len(c.Consumers) > 0:
		fmt.Fprintf(b, "\n## %s\n\n| consumer | by | verdict | ack floor want | ack floor got | config | note |\n|---|---|---|---|---|---|---|\n", c.Name)
		for _, s := range c.Consumers {
			got := "not read"
			if s.GotFloor != nil {
				got = fmt.Sprint(*s.GotFloor)
			}
			cfg := "unchanged"
			if s.GotConfig == "" {
				cfg = "not read"
			} else if s.GotConfig != s.WantConfig {
				cfg = "changed"
			}
			fmt.Fprintf(b, "| %s on %s | %s | %s | %d | %s | %s | %s |\n", cell(s.Consumer), cell(s.Stream), s.By, s.Verdict,
				s.WantFloor, got, cfg, cell(s.Note))
		}
	default:
		return
	}
	if c.Omitted > 0 {
		fmt.Fprintf(b, "\n%d more passed and are left out.\n", c.Omitted)
	}
}

// String is the count as a table cell: "12 msgs, 3456 bytes, seq 1..12".
func (s StreamCount) String() string {
	return fmt.Sprintf("%d msgs, %d bytes, seq %d..%d", s.Messages, s.Bytes, s.FirstSeq, s.LastSeq)
}

// wantGot are a stream's figures as two table cells.
func (f StreamFigures) wantGot() (string, string) {
	want, got := "not read", "not read"
	switch {
	case f.Count != nil:
		want, got = fmt.Sprintf("%d subjects", f.Count.Want), fmt.Sprintf("%d subjects", f.Count.Got)
		if f.Count.Objects != nil && f.Count.Chunks != nil {
			got += fmt.Sprintf(" (%d objects, %d chunk subjects)", *f.Count.Objects, *f.Count.Chunks)
		}
		return want, got
	case f.Want != nil:
		want = f.Want.String()
	}
	if f.Got != nil {
		got = f.Got.String()
	}
	return want, got
}

func orNone(s string) string {
	if s == "" {
		return "(none given)"
	}
	return s
}

// cell makes text safe for one Markdown table cell.
func cell(s string) string {
	s = strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ").Replace(s)
	return s
}

// DecodeEvidence reads evidence.json strictly: at most 1 MiB, known keys
// only, a verdict of PASS or FAIL on the report and on each check, and at
// most maxEvidenceItems streams and consumers per check. It is how the
// keeper reads a report back from the store.
func DecodeEvidence(data []byte) (*Evidence, error) {
	if len(data) > MaxEvidenceSize {
		return nil, fmt.Errorf("the evidence report is %d bytes, over the limit of %d", len(data), MaxEvidenceSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ev Evidence
	if err := dec.Decode(&ev); err != nil {
		return nil, fmt.Errorf("the evidence report is not valid: %w", err)
	}
	// The report's types decode themselves (wirecase.go), out of the
	// decoder's strictness: their keys are checked here.
	if err := CheckWireKeys(data, reflect.TypeFor[Evidence]()); err != nil {
		return nil, fmt.Errorf("the evidence report is not valid: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the evidence report holds more than one JSON value")
	}
	if ev.Verdict != Pass && ev.Verdict != Fail {
		return nil, fmt.Errorf("the evidence report's verdict is %.20q, not PASS or FAIL", ev.Verdict)
	}
	if len(ev.Checks) > 2*len(checkTitles) || len(ev.Steps) > 64 {
		return nil, fmt.Errorf("the evidence report holds %d checks and %d steps, more than a restore makes", len(ev.Checks), len(ev.Steps))
	}
	for _, c := range ev.Checks {
		if c.Verdict != Pass && c.Verdict != Fail {
			return nil, fmt.Errorf("check %.40q has verdict %.20q, not PASS or FAIL", c.Name, c.Verdict)
		}
		if len(c.Streams) > maxEvidenceItems || len(c.Consumers) > maxEvidenceItems {
			return nil, fmt.Errorf("check %.40q lists more than %d items", c.Name, maxEvidenceItems)
		}
		// A report whose verdict says PASS while a check failed is not one
		// the keeper wrote.
		if c.Verdict == Fail && ev.Verdict == Pass {
			return nil, fmt.Errorf("the evidence report says PASS but its check %.40q failed", c.Name)
		}
	}
	if ev.Verdict == Pass && len(ev.Checks) == 0 {
		return nil, fmt.Errorf("the evidence report says PASS but holds no check")
	}
	return &ev, nil
}
