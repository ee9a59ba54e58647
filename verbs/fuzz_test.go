package verbs

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/kept"
)

// FuzzDecodeRequest: any body either decodes to a request that passes
// CheckRequest and survives a round trip, or is refused with a 400 sentence.
// The admission's quick look at the body (heavyVerb, which reads dry-run
// before the request is decoded) agrees with the request decoded.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e","catch-up":"m","caller":"c"}`,
		`{"module":"a","local":"b","why":"w","aside-only":true}`, `{"from":"a.b.20260101T000000","why":"w"}`,
		`{"module":"a","local":"b","streams":["S","T"],"consumers":[{"stream":"S","consumer":"c"}]}`,
		`{"module":"a","local":"b","streams":["a.b"]}`, `{"module":"a","local":"b","streams":[]}`,
		`{"module":"a","local":"b","streams":["S"],"consumers":[]}`, `{"module":"a","local":"b","consumers":[]}`,
		`{"module":"a","module":"b"}`, `{"Module":"a"}`, `{"module":"a","local":"b","fingerprint":"f","why":"w","dry-run":true}`, `[1]`, `{"form":1e3}`, `{"module":"a\u0000"}`, `{} {}`, ``,
		// No request key was ever snake_case: these spellings are refused, as
		// every unknown key is (README, "Wire casing").
		`{"module":"a","local":"b","catch_up":"m"}`, `{"module":"a","local":"b","why":"w","dry_run":true}`,
		`{"module":"a","local":"b","why":"w","aside_only":true}`, `{"module":"a","local":"b","keep_for":"1h"}`,
		`{"module":"a","local":"b","why":"w","placement_tags":["t"],"placement-cluster":"c"}`,
		`{"module":"a","local":"b","policy":{"keep_last":1}}`, `{"module":"a","local":"b","policy":{"keep-last":1,"time_zone":"UTC"}}`,
		`{"module":"a","local":"b","fingerprint":"f","limit":5,"after":"KV_a_b/keys/dXNlci4x"}`, `{"module":"a","local":"b","from":"aside/a.b.20260101T000000","after":"S/appended/"}`,
	} {
		for _, v := range Verbs() {
			f.Add(v, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, verb string, body []byte) {
		r, err := DecodeRequest(verb, body)
		if err != nil {
			if !errors.Is(err, kept.ErrBadRequest) || !strings.HasSuffix(err.Error(), nothingDone) {
				t.Fatalf("refusal is not a 400 sentence: %v", err)
			}
			if !reflect.DeepEqual(r, kept.Request{}) {
				t.Fatalf("refused request still returned %+v", r)
			}
			return
		}
		if err := CheckRequest(verb, r); err != nil {
			t.Fatalf("accepted request fails CheckRequest: %v", err)
		}
		heavy := verb == kept.VerbSnapshot || verb == kept.VerbVerify || (verb == kept.VerbRestore && !r.DryRun)
		if heavyVerb(verb, body) != heavy {
			t.Fatalf("%s %s: heavyVerb says %v, the decoded request (dry-run %v) %v", verb, body, !heavy, r.DryRun, heavy)
		}
		if bytes.Contains(snakeKey.Find(body), []byte("_")) {
			t.Fatalf("accepted a request with a snake_case key: %s", body)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if k := snakeKey.Find(again); k != nil {
			t.Fatalf("a request is written with the snake_case key %s: %s", k, again)
		}
		r2, err := DecodeRequest(verb, again)
		if err != nil || !reflect.DeepEqual(r2, r) {
			t.Fatalf("round trip of %s: %+v, %v", again, r2, err)
		}
		for _, name := range []string{r.Module, r.Local, r.Fingerprint} {
			if strings.ContainsAny(name, "/\\.*> \x00") || len(name) > kept.MaxNameLen {
				t.Fatalf("accepted a name that is not plain: %q", name)
			}
		}
		for _, s := range r.Streams {
			if kept.CheckStreamName("stream", s) != nil {
				t.Fatalf("accepted a plan stream that is not a stream name: %q", s)
			}
		}
	})
}

// snakeKey finds a JSON key, as json.Marshal writes one, holding an
// underscore (a request's values are names and sentences without quotes
// followed by a colon, so it finds only keys).
var snakeKey = regexp.MustCompile(`"[a-zA-Z0-9-]*_[a-zA-Z0-9_-]*":`)

// FuzzDecodeReply: whatever comes back on the bus, the client returns either a
// reply or an error, never both and never a panic; a failure reply is an
// *Error that maps to a keeper sentinel. A reply the client reads, in the
// keys of this release or of the one before (snake_case), is read again the
// same once written out (with both keys).
func FuzzDecodeReply(f *testing.F) {
	f.Add("", []byte(`{"said":"done."}`))
	f.Add("", []byte(`{"said":"listed.","points":[{"module":"a","archive_size":3,"positions":[{"stream":"S","ack_floor":1}]}],"total_bytes":3,"totals":[{"point_bytes":3}]}`))
	f.Add("", []byte(`{"said":"listed.","points":[{"module":"a","archive-size":3,"archive_size":3}],"total-bytes":3,"total_bytes":4}`))
	f.Add("", []byte(`{"said":"restored.","evidence":{"verdict":"PASS","checks":[{"consumers":[{"want_ack_floor":1,"want-ack-floor":2}]}]}}`))
	f.Add("500", []byte(`{"error":"failed","code":500,"evidence":{"verdict":"FAIL","point_sum":"x"}}`))
	f.Add("404", []byte(`{"error":"there is no restore point x","code":404}`))
	f.Add("409", []byte(`not json`))
	f.Add("abc", []byte(``))
	f.Add("", []byte(`{"said":1}`))
	f.Fuzz(func(t *testing.T, code string, data []byte) {
		msg := nats.NewMsg("_INBOX.x")
		msg.Data = data
		if code != "" {
			msg.Header.Set(micro.ErrorCodeHeader, code)
			msg.Header.Set(micro.ErrorHeader, "said")
		}
		rep, err := decodeReply("mesh-broker.list-kept", msg)
		if (rep == nil) == (err == nil) {
			t.Fatalf("reply %v and error %v", rep, err)
		}
		if rep != nil {
			out, err := json.Marshal(rep)
			if err != nil {
				t.Fatalf("a reply read does not encode: %v", err)
			}
			msg.Data = out
			again, err := decodeReply("mesh-broker.list-kept", msg)
			if err != nil {
				t.Fatalf("a reply written out is not read: %v\n%s", err, out)
			}
			if b, _ := json.Marshal(again); !bytes.Equal(b, out) {
				t.Fatalf("a reply read again differs:\n%s\n%s", out, b)
			}
		}
		var ve *Error
		if code != "" {
			if !errors.As(err, &ve) || ve.Said == "" || kept.KindOf(err) == nil {
				t.Fatalf("failure reply became %v", err)
			}
		}
	})
}
