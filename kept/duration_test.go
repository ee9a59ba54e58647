package kept_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

const day = 24 * time.Hour

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in    string
		want  time.Duration
		print string
	}{
		{"0", 0, "0"},
		{"0d", 0, "0"},
		{"30d", 30 * day, "30d"},
		{"2w", 14 * day, "2w"},
		{"14d", 14 * day, "2w"},
		{"12h", 12 * time.Hour, "12h"},
		{"90m", 90 * time.Minute, "1h30m"},
		{"1d12h", 36 * time.Hour, "1d12h"},
		{"36h", 36 * time.Hour, "1d12h"},
		{"1w3d", 10 * day, "10d"},
		{"1w2d3h4m5s", 9*day + 3*time.Hour + 4*time.Minute + 5*time.Second, "9d3h4m5s"},
		{"36500d", 36500 * day, "36500d"},
	} {
		d, err := kept.ParseDuration(c.in)
		if err != nil || time.Duration(d) != c.want || d.String() != c.print {
			t.Errorf("ParseDuration(%q) = %v (%s), %v; want %v (%s)", c.in, time.Duration(d), d, err, c.want, c.print)
		}
	}
}

func TestParseDurationRefuses(t *testing.T) {
	for in, says := range map[string]string{
		"":                      "empty",
		"1y":                    "months or years",
		"1mo":                   "months or years",
		"1M":                    "months or years",
		"3months":               "months or years",
		"1year":                 "months or years",
		"2Mo":                   "months or years",
		"30":                    "has no unit",
		"d":                     "does not start with a number",
		"-1d":                   "does not start with a number",
		"+1d":                   "does not start with a number",
		" 1d":                   "does not start with a number",
		"1.5h":                  `unknown unit "."`,
		"1d ":                   `unknown unit "d "`,
		"1x":                    `unknown unit "x"`,
		"12h1d":                 "largest first",
		"1d1d":                  "largest first",
		"36501d":                "over the limit of 36500d",
		"5215w":                 "over the limit",
		"36500d1s":              "over the limit",
		"99999999999999999999w": "over the limit",
		strings.Repeat("1", 65): "over the limit of 64",
	} {
		_, err := kept.ParseDuration(in)
		if err == nil || !errors.Is(err, kept.ErrBadRequest) || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseDuration(%q) = %v; want a bad request saying %q", in, err, says)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	var v struct {
		D kept.Duration `json:"d"`
	}
	if err := json.Unmarshal([]byte(`{"d":"1d12h"}`), &v); err != nil || time.Duration(v.D) != 36*time.Hour {
		t.Fatalf("unmarshal: %v, %v", v.D, err)
	}
	if b, err := json.Marshal(v); err != nil || string(b) != `{"d":"1d12h"}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"d":"1y"}`), &v); !errors.Is(err, kept.ErrBadRequest) {
		t.Errorf("1y: %v; want a bad request", err)
	}
	if err := json.Unmarshal([]byte(`{"d":3600}`), &v); err == nil {
		t.Errorf("a number: no error; want one")
	}
	v.D = kept.Duration(1500 * time.Millisecond)
	if _, err := json.Marshal(v); err == nil {
		t.Errorf("marshal of 1.5s: no error; want one")
	}
}

// FuzzParseDuration: ParseDuration never panics, refuses only with a bad
// request, and a value it reads prints as text it reads back to that value.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "30d", "2w", "12h", "90m", "1d12h", "1w2d3h4m5s", "36500d", "1y", "12h1d", "99999999999999999999w", "1mo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := kept.ParseDuration(s)
		if err != nil {
			if !errors.Is(err, kept.ErrBadRequest) {
				t.Fatalf("ParseDuration(%q): %v is not a bad request", s, err)
			}
			return
		}
		if d < 0 || d > kept.MaxDuration {
			t.Fatalf("ParseDuration(%q) = %v, out of range", s, time.Duration(d))
		}
		back, err := kept.ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v, printed %q, read back as %v, %v", s, time.Duration(d), d.String(), time.Duration(back), err)
		}
	})
}
