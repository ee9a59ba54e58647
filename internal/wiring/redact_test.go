package wiring_test

import (
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/wiring"
)

// FuzzRedact: a store URL is outside input (the --store flag), and a
// person may put a password or a NATS token (the user part) in it, escaped
// or not. Redact's sentence never holds either, whether or not the URL
// parses; a URL without an @, or with its @ in a path under no host
// (file:///srv/keeper@prod: by URL syntax it has no user part), holds no
// credentials and is said as given.
func FuzzRedact(f *testing.F) {
	f.Add("nats", "user", "s3cret", "host:4222/bucket")
	f.Add("nats", "", "tok3n", "host/bucket")
	f.Add("nats", "user", "pa%ss", "host:4222/bucket") // an unescaped %: the URL does not parse
	f.Add("nats", "user", "12?x", "host/bucket")       // parses, as host user:12 and a query
	f.Add("nats", "user", "12/w", "host/bucket")       // parses, as host user:12 and a path
	f.Add("s3", "AKIA", "a@b/c", "bucket/prefix")
	f.Add("file", "", "x", "/srv/keeper@prod")
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		with := scheme + "://" + user + ":" + pass + "@" + rest
		token := scheme + "://" + pass + "@" + rest
		for _, u := range []string{with, token} {
			skeleton := strings.Replace(u, pass, "", 1)
			if len(pass) < 3 || hostless(u) || strings.Contains(skeleton, pass) || strings.Contains(wiring.Redact(skeleton), pass) {
				continue // the secret is not told apart from the rest of the URL
			}
			if got := wiring.Redact(u); strings.Contains(got, pass) {
				t.Fatalf("Redact(%q) = %q holds the secret %q", u, got, pass)
			}
		}
		if plain := scheme + "://" + rest; !strings.Contains(plain, "@") && wiring.Redact(plain) != plain {
			t.Fatalf("Redact(%q) = %q, a URL without credentials changed", plain, wiring.Redact(plain))
		}
		if path := "file:///" + rest; wiring.Redact(path) != path {
			t.Fatalf("Redact(%q) = %q, a path changed", path, wiring.Redact(path))
		}
	})
}

// hostless reports whether u, read as a URL, has a scheme and then no host:
// what follows its first "://" begins with "/", so its @ is in its path
// (the fuzzer's scheme may hold a "://" of its own: "A:///" then
// "://0:000@0" is the URL A:///://0:000@0, scheme A and no host).
func hostless(u string) bool {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || scheme == "" || !strings.HasPrefix(rest, "/") {
		return false
	}
	for i, c := range scheme {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

func TestRedact(t *testing.T) {
	for u, want := range map[string]string{
		"nats://user:s3cret@host:4222/bucket": "nats://REDACTED@host:4222/bucket",
		"nats://tok3n@host/bucket":            "nats://REDACTED@host/bucket",
		"nats://user:pa%ss@host/bucket":       "nats://REDACTED@host/bucket", // does not parse
		"nats://user:12?x@host/bucket":        "nats://REDACTED@host/bucket", // parses as host user:12
		"user:s3cret@host":                    "REDACTED@host",
		"file:///srv/keeper@prod":             "file:///srv/keeper@prod",
		":///://0:000@0":                      "REDACTED@0", // no scheme before the first ://, so no path after it
		"s3://bucket/prefix":                  "s3://bucket/prefix",
		"nats://host:4222/bucket":             "nats://host:4222/bucket",
	} {
		if got := wiring.Redact(u); got != want {
			t.Errorf("Redact(%q) = %q, want %q", u, got, want)
		}
	}
}
