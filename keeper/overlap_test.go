package keeper

import "testing"

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
