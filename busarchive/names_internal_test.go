package busarchive

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// streamNameCases is the table of the one stream and consumer name rule.
var streamNameCases = []struct {
	name string
	ok   bool
}{
	{"KV_billing_ledger", true},
	{"OBJ_billing_ledger", true},
	{"billing_ledger", true},
	{"ORDERS", true},
	{"a-b=c", true},
	{"ünïcode", true},
	{"x", true},
	{strings.Repeat("x", MaxStreamNameLen), true},
	{"", false},
	{strings.Repeat("x", MaxStreamNameLen+1), false},
	{"a.b", false},
	{".", false},
	{"..", false},
	{"a b", false},
	{"a*", false},
	{"a>", false},
	{"a/b", false},
	{`a\b`, false},
	{"a\x00b", false},
	{"a\tb", false},
	{"a\rb", false},
	{"a\nb", false},
	{"a\x01b", false},
	{"a\x7fb", false},
	{"a\xffb", false}, // not UTF-8
}

func TestValidStreamNameTable(t *testing.T) {
	for _, c := range streamNameCases {
		if got := ValidStreamName(c.name); got != c.ok {
			t.Errorf("ValidStreamName(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}

// FuzzValidStreamName checks the rule's promise on any input: an accepted
// name is 1 to 255 bytes of UTF-8 with none of the refused characters, and
// is exactly one stream directory of the archive's layout; a refused one
// fails one of those.
func FuzzValidStreamName(f *testing.F) {
	for _, c := range streamNameCases {
		f.Add(c.name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ok := ValidStreamName(name)
		clean := name != "" && len(name) <= MaxStreamNameLen && utf8.ValidString(name) &&
			!strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || strings.ContainsRune(".*>/\\ ", r) })
		if ok != clean {
			t.Fatalf("ValidStreamName(%q) = %v, but the name is clean: %v", name, ok, clean)
		}
		if !ok {
			return
		}
		for _, entry := range []string{DataEntry(name), MetaEntry(name)} {
			stream, _, err := parseEntryName(entry)
			if err != nil || stream != name {
				t.Fatalf("the entry %q of an accepted name parses as stream %q, %v", entry, stream, err)
			}
		}
	})
}
