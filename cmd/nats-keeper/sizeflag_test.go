package main

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "10B": 10, "512KiB": 512 << 10, "64MiB": 64 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "+5", "1.5MiB", "64mb", "64 MiB", "1025TiB", "99999999999999999999"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want a refusal", in, got)
		}
	}
}

// FuzzParseSize: a size flag never panics, never goes negative or over
// the bound, and what it reads is written back so it reads the same.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "64MiB", "1TiB", "-1", "12KiBB", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n < 0 || n > maxSizeFlag {
			t.Fatalf("parseSize(%q) = %d, out of range", s, n)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Fatalf("parseSize(formatSize(%d)) = %d, %v", n, back, err)
		}
	})
}
