package verbs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/kept"
)

func TestDecodeRequestGood(t *testing.T) {
	cases := []struct {
		verb, body string
		want       kept.Request
	}{
		{kept.VerbSnapshot, `{"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e","catch-up":"ledger-migrate-3-to-4","caller":"ops-jane"}`,
			kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c1a7e", CatchUp: "ledger-migrate-3-to-4", Caller: "ops-jane"}},
		{kept.VerbRestore, ` {"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e","why":"roll back release 42","dry-run":true} `,
			kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c1a7e", Why: "roll back release 42", DryRun: true}},
		{kept.VerbRestore, `{"module":"billing","local":"ledger","aside-only":true,"why":"clear it"}`,
			kept.Request{Module: "billing", Local: "ledger", AsideOnly: true, Why: "clear it"}},
		{kept.VerbDiscard, `{"from":"billing.ledger.20260101T000000","why":"checked, not needed"}`,
			kept.Request{From: "billing.ledger.20260101T000000", Why: "checked, not needed"}},
		{kept.VerbList, `{}`, kept.Request{}},
		{kept.VerbRestore, `{"module":"billing","local":"ledger","form":1,"fingerprint":"x","why":"w","replicas":1,"placement-cluster":"east","placement-tags":["az:1","ssd"]}`,
			kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "x", Why: "w", Replicas: 1, PlacementCluster: "east", PlacementTags: []string{"az:1", "ssd"}}},
		{kept.VerbList, `{"module":"billing"}`, kept.Request{Module: "billing"}},
		{kept.VerbVerify, `{"module":"billing","local":"ledger","form":0,"fingerprint":"x"}`,
			kept.Request{Module: "billing", Local: "ledger", Fingerprint: "x"}},
		{kept.VerbSetPlan, `{"module":"billing","local":"ledger","streams":["LEDGER","KV_billing_ledger"],"consumers":[{"stream":"ORDERS","consumer":"feed"}]}`,
			kept.Request{Module: "billing", Local: "ledger", Streams: []string{"LEDGER", "KV_billing_ledger"},
				Consumers: []kept.PlanConsumer{{Stream: "ORDERS", Consumer: "feed"}}}},
		{kept.VerbShowPlan, `{"module":"billing","local":"ledger"}`, kept.Request{Module: "billing", Local: "ledger"}},
		{kept.VerbRestore, `{"module":"billing","local":"ledger","form":1,"fingerprint":"x","why":"w","method":"delta","downstream":"leave"}`,
			kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "x", Why: "w", Method: "delta", Downstream: "leave"}},
		{kept.VerbCapture, `{"module":"billing","local":"ledger","capture":"on","settings":{"segment-every":"2s","segment-bytes":1048576,"base-every":"12h","window":"3d"},"form":2,"caller":"c","why":"w"}`,
			kept.Request{Module: "billing", Local: "ledger", Capture: "on", Form: 2, Caller: "c", Why: "w",
				Settings: &kept.CaptureSettings{SegmentEvery: kept.Duration(2 * time.Second), SegmentBytes: 1 << 20, BaseEvery: kept.Duration(12 * time.Hour), Window: kept.Duration(72 * time.Hour)}}},
		{kept.VerbCapture, `{"module":"billing","local":"ledger","capture":"off"}`, kept.Request{Module: "billing", Local: "ledger", Capture: "off"}},
		{kept.VerbRestore, `{"module":"billing","local":"ledger","why":"w","at":"2026-12-06T10:30:00Z"}`,
			kept.Request{Module: "billing", Local: "ledger", Why: "w", At: "2026-12-06T10:30:00Z"}},
		{kept.VerbRestore, `{"module":"billing","local":"ledger","why":"w","at-seq":{"KV_billing_ledger":12,"billing_ledger":40}}`,
			kept.Request{Module: "billing", Local: "ledger", Why: "w", AtSeq: map[string]uint64{"KV_billing_ledger": 12, "billing_ledger": 40}}},
	}
	for _, c := range cases {
		got, err := DecodeRequest(c.verb, []byte(c.body))
		if err != nil {
			t.Errorf("%s %s: %v", c.verb, c.body, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s: got %+v, want %+v", c.verb, c.body, got, c.want)
		}
	}
}

func TestDecodeRequestRefused(t *testing.T) {
	long := strings.Repeat("a", 10000)
	cases := []struct{ name, verb, body string }{
		{"empty", kept.VerbList, ``},
		{"null", kept.VerbList, `null`},
		{"array", kept.VerbList, `[]`},
		{"string", kept.VerbList, `"x"`},
		{"two objects", kept.VerbList, `{}{}`},
		{"trailing garbage", kept.VerbList, `{} x`},
		{"malformed", kept.VerbList, `{"module":`},
		{"unknown key", kept.VerbList, `{"modul":"x"}`},
		{"wrong case key", kept.VerbList, `{"Module":"x"}`},
		{"duplicate key", kept.VerbList, `{"module":"a","module":"b"}`},
		{"wrong type form", kept.VerbSnapshot, `{"module":"a","local":"b","form":"3","fingerprint":"f"}`},
		{"float form", kept.VerbSnapshot, `{"module":"a","local":"b","form":3.5,"fingerprint":"f"}`},
		{"huge form", kept.VerbSnapshot, `{"module":"a","local":"b","form":99999999999999999999,"fingerprint":"f"}`},
		{"negative form", kept.VerbSnapshot, `{"module":"a","local":"b","form":-1,"fingerprint":"f"}`},
		{"wrong type bool", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","dry-run":"yes"}`},
		{"object module", kept.VerbList, `{"module":{"a":1}}`},
		{"dot", kept.VerbSnapshot, `{"module":"a.b","local":"b","fingerprint":"f"}`},
		{"dotdot", kept.VerbSnapshot, `{"module":"..","local":"b","fingerprint":"f"}`},
		{"slash", kept.VerbSnapshot, `{"module":"a","local":"b/c","fingerprint":"f"}`},
		{"backslash", kept.VerbSnapshot, `{"module":"a","local":"b\\c","fingerprint":"f"}`},
		{"space", kept.VerbSnapshot, `{"module":"a b","local":"b","fingerprint":"f"}`},
		{"star", kept.VerbVerify, `{"module":"a","local":"*","fingerprint":"f"}`},
		{"star restore without at", kept.VerbRestore, `{"module":"a","local":"*","fingerprint":"f","why":"w"}`},
		{"star with keep-for", kept.VerbSnapshot, `{"module":"a","local":"*","fingerprint":"f","keep-for":"1d"}`},
		{"gt", kept.VerbSnapshot, `{"module":"a","local":"b","fingerprint":">"}`},
		{"nul", kept.VerbSnapshot, `{"module":"a\u0000","local":"b","fingerprint":"f"}`},
		{"long name", kept.VerbSnapshot, `{"module":"` + long + `","local":"b","fingerprint":"f"}`},
		{"missing fingerprint", kept.VerbSnapshot, `{"module":"a","local":"b"}`},
		{"snapshot dry-run", kept.VerbSnapshot, `{"module":"a","local":"b","fingerprint":"f","dry-run":true}`},
		{"restore without why", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f"}`},
		{"unknown method", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","method":"sideways"}`},
		{"method on snapshot", kept.VerbSnapshot, `{"module":"a","local":"b","fingerprint":"f","method":"full"}`},
		{"downstream not leave", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","downstream":"keep"}`},
		{"discard without why", kept.VerbDiscard, `{"from":"a.b.20260101T000000"}`},
		{"replicas on snapshot", kept.VerbSnapshot, `{"module":"a","local":"b","fingerprint":"f","replicas":1}`},
		{"replicas 6", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","replicas":6}`},
		{"negative replicas", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","replicas":-1}`},
		{"replicas with aside-only", kept.VerbRestore, `{"module":"a","local":"b","why":"w","aside-only":true,"replicas":1}`},
		{"tag with a space", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","placement-tags":["a b"]}`},
		{"empty tag", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","placement-tags":[""]}`},
		{"cluster with a newline", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","placement-cluster":"a\nb"}`},
		{"too many tags", kept.VerbRestore, `{"module":"a","local":"b","fingerprint":"f","why":"w","placement-tags":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`},
		{"discard traversal", kept.VerbDiscard, `{"from":"../../etc","why":"w"}`},
		{"discard slash", kept.VerbDiscard, `{"from":"a/b","why":"w"}`},
		{"discard dry-run", kept.VerbDiscard, `{"from":"a.b.20260101T000000","why":"w","dry-run":true}`},
		{"list local without module", kept.VerbList, `{"local":"b"}`},
		{"verify missing local", kept.VerbVerify, `{"module":"a","fingerprint":"f"}`},
		{"unknown verb", "drop-everything", `{}`},
		{"oversize", kept.VerbList, `{"why":"` + strings.Repeat("x", MaxBody) + `"}`},
	}
	for _, c := range cases {
		_, err := DecodeRequest(c.verb, []byte(c.body))
		if err == nil {
			t.Errorf("%s: %s %.80s was accepted", c.name, c.verb, c.body)
			continue
		}
		if !errors.Is(err, kept.ErrBadRequest) {
			t.Errorf("%s: error does not wrap ErrBadRequest: %v", c.name, err)
		}
		if Code(err) != 400 {
			t.Errorf("%s: code %d, want 400", c.name, Code(err))
		}
		if !strings.HasSuffix(err.Error(), "so nothing was done") {
			t.Errorf("%s: sentence does not end with what was not done: %q", c.name, err)
		}
		if len(err.Error()) > 700 {
			t.Errorf("%s: sentence is %d bytes long; hostile input must be clipped", c.name, len(err.Error()))
		}
	}
}

func TestSemVerAndPrefix(t *testing.T) {
	for in, want := range map[string]string{"v1.2.3": "1.2.3", "0.4.0-rc.1": "0.4.0-rc.1", "(devel)": "0.0.0-dev", "": "0.0.0-dev",
		"v0.0.0-20260101000000-abcdef123456": "0.0.0-20260101000000-abcdef123456"} {
		if got := SemVer(in); got != want {
			t.Errorf("SemVer(%q) = %q, want %q", in, got, want)
		}
	}
	for _, ok := range []string{"mesh-broker", "ops.keeper"} {
		if err := CheckPrefix(ok); err != nil {
			t.Errorf("prefix %q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a..b", "a.>", "a b", "*", ".a"} {
		if err := CheckPrefix(bad); err == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

func TestSemVerIsWhatMicroTakes(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t, nil))
	for _, v := range []string{"v0.0.0-20261130103300-7aa4e08abcde+dirty", "0.0.0-dev+7aa4e08abcde.dirty", "v1.2.3-01", "(devel)", "v1.2", "v2.0.0-rc.1"} {
		got := SemVer(v)
		svc, err := micro.AddService(nc, micro.Config{Name: "x", Version: got})
		if err != nil {
			t.Errorf("SemVer(%q) = %q, which micro refuses: %v", v, got, err)
			continue
		}
		_ = svc.Stop()
	}
}
