package kept_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/kept"
)

// FuzzDecodeEvidence feeds evidence.json as the store may hold it, written
// by any hand: DecodeEvidence never panics, refuses what it cannot vouch
// for (a PASS with a failed check or none, an unknown verdict, an unknown
// key, too many items), and what it accepts encodes and reads back the same,
// and renders as summary.md.
func FuzzDecodeEvidence(f *testing.F) {
	good := `{"verdict":"PASS","module":"billing","local":"ledger","kind":"replace","point":"points/billing/ledger/f1-fp",` +
		`"aside":"billing.ledger.20261201T180000","dir":"aside/billing.ledger.20261201T180000","started":"2026-12-01T18:00:00Z",` +
		`"ended":"2026-12-01T18:00:01Z","checks":[{"name":"point-verified","verdict":"PASS","said":"PASS: 1 byte",` +
		`"archive":{"size":10,"bytes_checked":1,"streams":1,"how":"read"}},{"name":"streams-restored","verdict":"PASS","said":"x",` +
		`"streams":[{"stream":"S","verdict":"PASS","want":{"messages":1,"bytes":2,"first_seq":1,"last_seq":1},` +
		`"got":{"messages":1,"bytes":2,"first_seq":1,"last_seq":1}}]},{"name":"consumers-set","verdict":"PASS","said":"y",` +
		`"consumers":[{"stream":"S","consumer":"c","by":"reset","verdict":"PASS","want_ack_floor":1,"got_ack_floor":1,"want_config":"a","got_config":"a"}]}],` +
		`"steps":[{"step":"restore","started":"2026-12-01T18:00:00Z","ended":"2026-12-01T18:00:01Z","seconds":1}],"said":"PASS: all 3 checks passed"}`
	if ev, err := kept.DecodeEvidence([]byte(good)); err != nil || ev.Verdict != kept.Pass || len(ev.Checks) != 3 {
		f.Fatalf("the good seed: %+v %v", ev, err)
	}
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, `"verdict":"PASS","said":"x"`, `"verdict":"FAIL","said":"x"`, 1)))
	f.Add([]byte(strings.Replace(good, `{"verdict":"PASS"`, `{"verdict":"FAIL"`, 1)))
	f.Add([]byte(`{"verdict":"PASS","checks":[]}`))
	f.Add([]byte(`{"verdict":"maybe"}`))
	f.Add([]byte(`{"verdict":"FAIL","extra":1}`))
	f.Add([]byte(`{"verdict":"FAIL"} {"verdict":"FAIL"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := kept.DecodeEvidence(data)
		if err != nil {
			return
		}
		if ev.Verdict != kept.Pass && ev.Verdict != kept.Fail {
			t.Fatalf("accepted verdict %q", ev.Verdict)
		}
		for _, c := range ev.Checks {
			if c.Verdict == kept.Fail && ev.Verdict == kept.Pass {
				t.Fatalf("accepted a PASS with the failed check %s", c.Name)
			}
		}
		if ev.Verdict == kept.Pass && len(ev.Checks) == 0 {
			t.Fatal("accepted a PASS with no check")
		}
		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("an accepted report does not encode: %v", err)
		}
		back, err := kept.DecodeEvidence(again)
		if err != nil {
			t.Fatalf("an accepted report, encoded, is refused: %v\n%s", err, again)
		}
		if b, _ := json.Marshal(back); !bytes.Equal(b, again) {
			t.Fatalf("read back differently:\n%s\n%s", again, b)
		}
		_ = ev.Summary()
	})
}
