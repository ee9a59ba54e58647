package keeper_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper"
)

func TestCheckRequestRefuses(t *testing.T) {
	ok := keeper.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c", Why: "w", Caller: "c"}
	with := func(f func(*keeper.Request)) keeper.Request { r := ok; f(&r); return r }
	cases := []struct {
		name string
		verb string
		r    keeper.Request
		says string
	}{
		{"dot in module", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Module = "a.b" }), `holds '.'`},
		{"slash", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Local = "a/b" }), `holds '/'`},
		{"backslash", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Local = `a\b` }), `holds '\\'`},
		{"space", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Fingerprint = "a b" }), `holds ' '`},
		{"star", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Module = "*" }), `holds '*'`},
		{"gt", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Module = ">" }), `holds '>'`},
		{"nul", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Module = "a\x00" }), `holds '\x00'`},
		{"dotdot", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Local = ".." }), `may not be ".."`},
		{"empty", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Module = "" }), "module is empty"},
		{"10k name", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Module = strings.Repeat("a", 10000) }), "over the limit"},
		{"negative form", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.Form = -1 }), "outside"},
		{"snapshot from", keeper.VerbSnapshot, with(func(r *keeper.Request) { r.From = "x" }), "takes no from"},
		{"dry-run discard", keeper.VerbDiscard, with(func(r *keeper.Request) { r.From = "a.b.c"; r.DryRun = true }), "takes no dry-run; only restore-kept and prune-kept do"},
		{"keep-for on restore", keeper.VerbRestore, with(func(r *keeper.Request) { r.KeepFor = keeper.Duration(time.Hour) }), "takes no keep-for"},
		{"policy on list", keeper.VerbList, with(func(r *keeper.Request) { r.Policy = &keeper.Policy{KeepLast: 1} }), "takes no policy"},
		{"negative policy", keeper.VerbPrune, with(func(r *keeper.Request) { r.Policy = &keeper.Policy{KeepLast: -1} }), "outside"},
		{"restore without why", keeper.VerbRestore, with(func(r *keeper.Request) { r.Why = "" }), "why is required"},
		{"discard without why", keeper.VerbDiscard, with(func(r *keeper.Request) { r.From = "a.b.c"; r.Why = "" }), "why is required"},
		{"aside id traversal", keeper.VerbDiscard, with(func(r *keeper.Request) { r.From = "../../etc" }), "aside id"},
		{"aside id slash", keeper.VerbDiscard, with(func(r *keeper.Request) { r.From = "a.b/..c.d" }), "is not <module>.<local>.<time>"},
		{"long why", keeper.VerbRestore, with(func(r *keeper.Request) { r.Why = strings.Repeat("w", 5000) }), "over the limit"},
		{"unknown verb", "drop-all", ok, "unknown verb"},
		// 120 + 120 bytes: the aside id would be over the file system's 255.
		{"long module and local", keeper.VerbSnapshot, with(func(r *keeper.Request) {
			r.Module, r.Local = strings.Repeat("m", 120), strings.Repeat("l", 120)
		}), "240 bytes together, over the limit of 224"},
		{"long aside id", keeper.VerbDiscard, with(func(r *keeper.Request) {
			r.From = strings.Repeat("m", 120) + "." + strings.Repeat("l", 120) + ".20261201T000000"
		}), "over the limit of 224"},
		// Names a verb does not use are checked all the same.
		{"list with a bad fingerprint", keeper.VerbList, with(func(r *keeper.Request) { r.Fingerprint = " 000000" }), `holds ' '`},
		{"discard with a bad module", keeper.VerbDiscard, with(func(r *keeper.Request) { r.From = "a.b.20260101T000000"; r.Module = "a/b" }), `holds '/'`},
		{"restore from with a bad fingerprint", keeper.VerbRestore, with(func(r *keeper.Request) { r.From = "billing/ledger/f3-x"; r.Fingerprint = "x*" }), `holds '*'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := keeper.CheckRequest(c.verb, c.r)
			if !errors.Is(err, keeper.ErrBadRequest) {
				t.Fatalf("got %v, want bad request", err)
			}
			if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "nothing was done") {
				t.Errorf("got %q, want it to say %q and that nothing was done", err, c.says)
			}
		})
	}
	for _, verb := range []string{keeper.VerbSnapshot, keeper.VerbRestore, keeper.VerbVerify} {
		if err := keeper.CheckRequest(verb, ok); err != nil {
			t.Errorf("%s refused a good request: %v", verb, err)
		}
	}
}

func FuzzCheckRequest(f *testing.F) {
	f.Add("billing", "ledger", "9f2c", "billing.ledger.20260101T000000")
	f.Add("..", "a/b", "", "../x")
	f.Fuzz(func(t *testing.T, module, local, fp, from string) {
		r := keeper.Request{Module: module, Local: local, Fingerprint: fp, From: from, Why: "w"}
		for _, verb := range []string{keeper.VerbSnapshot, keeper.VerbRestore, keeper.VerbDiscard, keeper.VerbList, keeper.VerbVerify} {
			err := keeper.CheckRequest(verb, r)
			if err == nil {
				for _, s := range []string{module, local, fp} {
					if (s == "" && verb == keeper.VerbSnapshot) || s == "." || s == ".." || strings.ContainsAny(s, "/\\ *>.\x00") || len(s) > keeper.MaxNameLen {
						t.Fatalf("%s accepted %q", verb, s)
					}
				}
			}
			if err != nil && !errors.Is(err, keeper.ErrBadRequest) {
				t.Fatalf("refusal is not a bad request: %v", err)
			}
		}
	})
}

func TestValidNameRefusesWhatKVKeysCannotHold(t *testing.T) {
	for _, s := range []string{"café", "a+b", "ho\uFFFDst", "a:b", "a$b", "a#b"} {
		if err := keeper.ValidName("module", s); !errors.Is(err, keeper.ErrBadRequest) {
			t.Errorf("ValidName(%q) = %v, want bad request", s, err)
		}
	}
	for _, s := range []string{"billing", "ledger-v2", "f3_x", "a=b", "9f2c1a7e"} {
		if err := keeper.ValidName("module", s); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", s, err)
		}
	}
}

// CheckStreamName is busarchive's rule with a sentence: it accepts what
// that rule accepts, and its refusal is a bad request naming the value.
func TestCheckStreamNameIsTheOneRule(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"KV_billing_ledger", true}, {"ORDERS", true}, {"ünïcode", true},
		{"", false}, {"a.b", false}, {"a b", false}, {"a*", false}, {"a>", false},
		{"a/b", false}, {`a\b`, false}, {"a\x01b", false}, {"a\xffb", false},
		{strings.Repeat("x", 256), false},
	} {
		err := keeper.CheckStreamName("stream", c.name)
		if (err == nil) != c.ok || busarchive.ValidStreamName(c.name) != c.ok {
			t.Errorf("CheckStreamName(%q) = %v, busarchive %v; want ok %v", c.name, err, busarchive.ValidStreamName(c.name), c.ok)
		}
		if err != nil && (!errors.Is(err, keeper.ErrBadRequest) || !strings.Contains(err.Error(), "stream")) {
			t.Errorf("CheckStreamName(%q): %v, want a bad request naming the stream", c.name, err)
		}
	}
}
