package keeper

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func TestSubjectsCollide(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"a.*", "a.b.c", false},
		{"*.b", "a.*", true},
		{">", "x.y", true},
		{"a.b.>", "a.*.c", true},
		{"a.b", "a.b.c", false},
		{"billing.ledger.>", "billing.other.>", false},
	} {
		if got := subjectsCollide(c.a, c.b); got != c.want {
			t.Errorf("subjectsCollide(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := subjectsCollide(c.b, c.a); got != c.want {
			t.Errorf("subjectsCollide(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

// FuzzSubjectsCollide: subjects come from archived and live stream
// configurations; the check never panics, is symmetric, and a subject
// always collides with itself and with ">". On subjects the server takes
// it says what the server's own rule says (server.SubjectsCollide, what
// refuses a stream whose subjects overlap another's), since it is there to
// foresee that refusal.
func FuzzSubjectsCollide(f *testing.F) {
	f.Add("a.b", "a.*")
	f.Add("a.>", "")
	f.Add("..", "*.>")
	f.Add("a.*.c", "a.b.>")
	f.Add("*.*", "a.>")
	f.Add("a.b.c", "*.b")
	f.Fuzz(func(t *testing.T, a, b string) {
		if server.IsValidSubject(a) && server.IsValidSubject(b) && subjectsCollide(a, b) != server.SubjectsCollide(a, b) {
			t.Fatalf("subjectsCollide(%q, %q) = %v, the server's rule says %v", a, b, subjectsCollide(a, b), server.SubjectsCollide(a, b))
		}
		if subjectsCollide(a, b) != subjectsCollide(b, a) {
			t.Fatalf("not symmetric: %q %q", a, b)
		}
		if !subjectsCollide(a, a) {
			t.Fatalf("%q does not collide with itself", a)
		}
		if a != "" && !subjectsCollide(a, ">") {
			t.Fatalf("%q does not collide with >", a)
		}
	})
}
