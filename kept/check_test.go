package kept_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

func TestCheckRequestRefuses(t *testing.T) {
	ok := kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c", Why: "w", Caller: "c"}
	with := func(f func(*kept.Request)) kept.Request { r := ok; f(&r); return r }
	cases := []struct {
		name string
		verb string
		r    kept.Request
		says string
	}{
		{"dot in module", kept.VerbSnapshot, with(func(r *kept.Request) { r.Module = "a.b" }), `holds '.'`},
		{"slash", kept.VerbSnapshot, with(func(r *kept.Request) { r.Local = "a/b" }), `holds '/'`},
		{"backslash", kept.VerbSnapshot, with(func(r *kept.Request) { r.Local = `a\b` }), `holds '\\'`},
		{"space", kept.VerbSnapshot, with(func(r *kept.Request) { r.Fingerprint = "a b" }), `holds ' '`},
		{"star", kept.VerbSnapshot, with(func(r *kept.Request) { r.Module = "*" }), `holds '*'`},
		{"gt", kept.VerbSnapshot, with(func(r *kept.Request) { r.Module = ">" }), `holds '>'`},
		{"nul", kept.VerbSnapshot, with(func(r *kept.Request) { r.Module = "a\x00" }), `holds '\x00'`},
		{"dotdot", kept.VerbSnapshot, with(func(r *kept.Request) { r.Local = ".." }), `may not be ".."`},
		{"empty", kept.VerbSnapshot, with(func(r *kept.Request) { r.Module = "" }), "module is empty"},
		{"10k name", kept.VerbSnapshot, with(func(r *kept.Request) { r.Module = strings.Repeat("a", 10000) }), "over the limit"},
		{"negative form", kept.VerbSnapshot, with(func(r *kept.Request) { r.Form = -1 }), "outside"},
		{"snapshot from", kept.VerbSnapshot, with(func(r *kept.Request) { r.From = "x" }), "takes no from"},
		{"dry-run discard", kept.VerbDiscard, with(func(r *kept.Request) { r.From = "a.b.c"; r.DryRun = true }), "takes no dry-run; only restore-kept and prune-kept do"},
		{"keep-for on restore", kept.VerbRestore, with(func(r *kept.Request) { r.KeepFor = kept.Duration(time.Hour) }), "takes no keep-for"},
		{"policy on list", kept.VerbList, with(func(r *kept.Request) { r.Policy = &kept.Policy{KeepLast: 1} }), "takes no policy"},
		{"negative policy", kept.VerbPrune, with(func(r *kept.Request) { r.Policy = &kept.Policy{KeepLast: -1} }), "outside"},
		{"restore without why", kept.VerbRestore, with(func(r *kept.Request) { r.Why = "" }), "why is required"},
		{"discard without why", kept.VerbDiscard, with(func(r *kept.Request) { r.From = "a.b.c"; r.Why = "" }), "why is required"},
		{"aside id traversal", kept.VerbDiscard, with(func(r *kept.Request) { r.From = "../../etc" }), "aside id"},
		{"aside id slash", kept.VerbDiscard, with(func(r *kept.Request) { r.From = "a.b/..c.d" }), "is not <module>.<local>.<time>"},
		{"long why", kept.VerbRestore, with(func(r *kept.Request) { r.Why = strings.Repeat("w", 5000) }), "over the limit"},
		{"unknown verb", "drop-all", ok, "unknown verb"},
		// 120 + 120 bytes: the aside id would be over the file system's 255.
		{"long module and local", kept.VerbSnapshot, with(func(r *kept.Request) {
			r.Module, r.Local = strings.Repeat("m", 120), strings.Repeat("l", 120)
		}), "240 bytes together, over the limit of 224"},
		{"long aside id", kept.VerbDiscard, with(func(r *kept.Request) {
			r.From = strings.Repeat("m", 120) + "." + strings.Repeat("l", 120) + ".20261201T000000"
		}), "over the limit of 224"},
		// Names a verb does not use are checked all the same.
		{"list with a bad fingerprint", kept.VerbList, with(func(r *kept.Request) { r.Fingerprint = " 000000" }), `holds ' '`},
		{"discard with a bad module", kept.VerbDiscard, with(func(r *kept.Request) { r.From = "a.b.20260101T000000"; r.Module = "a/b" }), `holds '/'`},
		{"restore from with a bad fingerprint", kept.VerbRestore, with(func(r *kept.Request) { r.From = "billing/ledger/f3-x"; r.Fingerprint = "x*" }), `holds '*'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := kept.CheckRequest(c.verb, c.r)
			if !errors.Is(err, kept.ErrBadRequest) {
				t.Fatalf("got %v, want bad request", err)
			}
			if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "nothing was done") {
				t.Errorf("got %q, want it to say %q and that nothing was done", err, c.says)
			}
		})
	}
	for _, verb := range []string{kept.VerbSnapshot, kept.VerbRestore, kept.VerbVerify} {
		if err := kept.CheckRequest(verb, ok); err != nil {
			t.Errorf("%s refused a good request: %v", verb, err)
		}
	}
}

func FuzzCheckRequest(f *testing.F) {
	f.Add("billing", "ledger", "9f2c", "billing.ledger.20260101T000000")
	f.Add("..", "a/b", "", "../x")
	f.Fuzz(func(t *testing.T, module, local, fp, from string) {
		r := kept.Request{Module: module, Local: local, Fingerprint: fp, From: from, Why: "w"}
		for _, verb := range []string{kept.VerbSnapshot, kept.VerbRestore, kept.VerbDiscard, kept.VerbList, kept.VerbVerify} {
			err := kept.CheckRequest(verb, r)
			if err == nil {
				for i, s := range []string{module, local, fp} {
					if i == 1 && s == kept.AllLocals && verb == kept.VerbSnapshot {
						continue // every kept data of the module, at one cut
					}
					if (s == "" && verb == kept.VerbSnapshot) || s == "." || s == ".." || strings.ContainsAny(s, "/\\ *>.\x00") || len(s) > kept.MaxNameLen {
						t.Fatalf("%s accepted %q", verb, s)
					}
				}
			}
			if err != nil && !errors.Is(err, kept.ErrBadRequest) {
				t.Fatalf("refusal is not a bad request: %v", err)
			}
		}
	})
}

func TestValidNameRefusesWhatKVKeysCannotHold(t *testing.T) {
	for _, s := range []string{"café", "a+b", "ho\uFFFDst", "a:b", "a$b", "a#b"} {
		if err := kept.ValidName("module", s); !errors.Is(err, kept.ErrBadRequest) {
			t.Errorf("ValidName(%q) = %v, want bad request", s, err)
		}
	}
	for _, s := range []string{"billing", "ledger-v2", "f3_x", "a=b", "9f2c1a7e"} {
		if err := kept.ValidName("module", s); err != nil {
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
		err := kept.CheckStreamName("stream", c.name)
		if (err == nil) != c.ok || busarchive.ValidStreamName(c.name) != c.ok {
			t.Errorf("CheckStreamName(%q) = %v, busarchive %v; want ok %v", c.name, err, busarchive.ValidStreamName(c.name), c.ok)
		}
		if err != nil && (!errors.Is(err, kept.ErrBadRequest) || !strings.Contains(err.Error(), "stream")) {
			t.Errorf("CheckStreamName(%q): %v, want a bad request naming the stream", c.name, err)
		}
	}
}
