package kept_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A cursor's text reads back as the same cursor, whatever the name holds.
func TestDiffCursorRoundTrip(t *testing.T) {
	for _, c := range []kept.DiffCursor{
		{Stream: "KV_billing_ledger", List: kept.DiffKeys, Name: "user.1"},
		{Stream: "OBJ_x", List: kept.DiffObjects, Name: "a name/with spaces and ünïcode\x01"},
		{Stream: "S", List: kept.DiffAppended, Seq: 18446744073709551615},
		{Stream: "ünïcode", List: kept.DiffRemoved, Start: true},
	} {
		s := c.String()
		got, err := kept.ParseDiffCursor(s)
		if err != nil || got != c {
			t.Errorf("%+v → %q → %+v, %v", c, s, got, err)
		}
	}
	for _, bad := range []string{"", "S", "S/appended", "S/appended/x", "S/appended/01", "S/nope/1", "a.b/keys/", "S/keys/!!", "S/keys/a b", "S/keys/" + strings.Repeat("A", kept.MaxDiffCursor)} {
		if _, err := kept.ParseDiffCursor(bad); !errors.Is(err, kept.ErrBadRequest) {
			t.Errorf("ParseDiffCursor(%.40q) = %v, want a bad request", bad, err)
		}
	}
}

// diff-kept's request: module and local, and form and fingerprint or a
// from (not both); limit and after by its own rules; no other verb but
// list-kept pages.
func TestCheckDiffRequest(t *testing.T) {
	ok := kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "9f2c1a7e"}
	for _, r := range []kept.Request{ok, {Module: "billing", Local: "ledger", From: "points/billing/ledger/f3-x"},
		{Module: "billing", Local: "ledger", Fingerprint: "f", Limit: 5, After: "S/keys/"}} {
		if err := kept.CheckRequest(kept.VerbDiff, r); err != nil {
			t.Errorf("%+v refused: %v", r, err)
		}
	}
	for _, c := range []struct {
		r    kept.Request
		says string
	}{
		{kept.Request{Local: "ledger", Fingerprint: "f"}, "module"},
		{kept.Request{Module: "billing", Fingerprint: "f"}, "local"},
		{kept.Request{Module: "billing", Local: "ledger"}, "fingerprint"},
		{kept.Request{Module: "billing", Local: "ledger", Fingerprint: "f", From: "aside/x"}, "not both"},
		{kept.Request{Module: "billing", Local: "ledger", Fingerprint: "f", Limit: kept.MaxDiffLimit + 1}, "limit"},
		{kept.Request{Module: "billing", Local: "ledger", Fingerprint: "f", After: "point.a.b.1.f"}, "not a cursor diff-kept gave"},
		{kept.Request{Module: "billing", Local: "ledger", Fingerprint: "f", DryRun: true}, "takes no dry-run"},
		{kept.Request{Module: "billing", Local: "ledger", Fingerprint: "f", Method: "delta"}, "takes no method"},
	} {
		err := kept.CheckRequest(kept.VerbDiff, c.r)
		if !errors.Is(err, kept.ErrBadRequest) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want a bad request saying %q", c.r, err, c.says)
		}
	}
	if err := kept.CheckRequest(kept.VerbList, kept.Request{After: "S/keys/"}); !errors.Is(err, kept.ErrBadRequest) {
		t.Errorf("list-kept took a diff cursor: %v", err)
	}
	if err := kept.CheckRequest(kept.VerbList, kept.Request{After: "point.a.b.1.f"}); err != nil {
		t.Errorf("list-kept refused its own cursor: %v", err)
	}
}

// FuzzDiffRequest: diff-kept's request check refuses with a bad request
// or accepts a request whose names are plain, whose limit is in bounds and
// whose cursor parses, and prints back as itself.
func FuzzDiffRequest(f *testing.F) {
	f.Add("billing", "ledger", 3, "9f2c", "", 0, "")
	f.Add("billing", "ledger", 0, "", "points/billing/ledger/f3-x", 10, "KV_billing_ledger/keys/dXNlci4x")
	f.Add("..", "a/b", -1, "x", "aside/x\x00", 99999, "S/appended/12")
	f.Fuzz(func(t *testing.T, module, local string, form int, fp, from string, limit int, after string) {
		r := kept.Request{Module: module, Local: local, Form: form, Fingerprint: fp, From: from, Limit: limit, After: after}
		err := kept.CheckRequest(kept.VerbDiff, r)
		if err != nil {
			if !errors.Is(err, kept.ErrBadRequest) || !strings.HasSuffix(err.Error(), "so nothing was done") {
				t.Fatalf("refusal is not a bad request sentence: %v", err)
			}
			return
		}
		if kept.ValidName("module", module) != nil || kept.ValidName("local", local) != nil {
			t.Fatalf("accepted module %q local %q", module, local)
		}
		if (from == "") == (fp == "") || strings.ContainsRune(from, 0) {
			t.Fatalf("accepted from %q with fingerprint %q", from, fp)
		}
		if limit < 0 || limit > kept.MaxDiffLimit || form < 0 || form > kept.MaxForm {
			t.Fatalf("accepted limit %d form %d", limit, form)
		}
		if after != "" {
			c, err := kept.ParseDiffCursor(after)
			if err != nil || c.String() != after {
				t.Fatalf("accepted after %q that reads as %+v (%v) and prints as %q", after, c, err, c.String())
			}
		}
	})
}

// bigDiff is a diff reply of streams streams, each list holding up to n
// entries of names up to size bytes, and consumers consumers, from seed.
func bigDiff(seed uint64, streams, n, size, consumers int) *kept.Reply {
	rnd := rand.New(rand.NewPCG(seed, seed^0x5eed))
	name := func() string {
		b := make([]byte, rnd.IntN(size)+1)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return strings.ToValidUTF8(string(b), "?")
	}
	rep := &kept.Reply{Said: "a diff", Next: "S0/appended/1"}
	for i := range streams {
		s := kept.StreamChange{Stream: fmt.Sprintf("S%d", i), Kind: "kv", Appended: uint64(rnd.IntN(1 << 30)), Removed: uint64(rnd.IntN(1 << 20)),
			Then: &kept.SeqState{LastSeq: 7}, Now: &kept.SeqState{LastSeq: 9}, Config: []string{"description", "max_age"},
			Keys: &kept.KeyChanges{Added: n, Changed: n, Deleted: n}}
		for j := range rnd.IntN(n + 1) {
			s.AppendedSeqs = append(s.AppendedSeqs, fmt.Sprintf("%d-%d", 2*j, 2*j+1))
		}
		for j := range rnd.IntN(n + 1) {
			s.RemovedSeqs = append(s.RemovedSeqs, fmt.Sprint(3*j))
		}
		for range rnd.IntN(n + 1) {
			s.Keys.Names = append(s.Keys.Names, "+"+name())
		}
		rep.Streams = append(rep.Streams, s)
	}
	for i := range consumers {
		rep.Consumers = append(rep.Consumers, kept.ConsumerChange{Stream: "S0", Consumer: fmt.Sprintf("c-%d-%s", i, strings.Repeat("x", 40)), Then: 1, Now: 2})
	}
	return rep
}

// FuzzDiffReplyBound: a diff reply of any size is bounded under the max
// payload and stays valid JSON; when names were cut, its next is a cursor
// that parses and lies at or before the first name left out, so paging
// skips none.
func FuzzDiffReplyBound(f *testing.F) {
	f.Add(uint64(1), 3, 400, 40, 10, 64<<10)
	f.Add(uint64(2), 16, 300, 200, 1000, 16<<10)
	f.Add(uint64(3), 1, 5, 3, 0, 1<<20)
	f.Fuzz(func(t *testing.T, seed uint64, streams, n, size, consumers, max int) {
		streams, n, size, consumers = clamp(streams, 0, 16), clamp(n, 0, 400), clamp(size, 1, 200), clamp(consumers, 0, 1000)
		max = clamp(max, 8<<10, 256<<10)
		rep := bigDiff(seed, streams, n, size, consumers)
		got := kept.BoundReply(kept.VerbDiff, rep, max)
		body, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(body) > max || !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("bounded reply is %d bytes (max %d), valid JSON %v", len(body), max, json.Valid(body))
		}
		var back kept.Reply
		if err := json.Unmarshal(body, &back); err != nil {
			t.Fatalf("bounded reply does not read back: %v", err)
		}
		if got == rep {
			return
		}
		if got.Cut == nil {
			t.Fatal("a changed reply says nothing of its cut")
		}
		if got.Next == "" {
			t.Fatal("a cut diff has no next page")
		}
		c, err := kept.ParseDiffCursor(got.Next)
		if err != nil {
			t.Fatalf("next %q does not parse: %v", got.Next, err)
		}
		if got.Next != rep.Next {
			checkResume(t, rep, got, c)
		}
	})
}

// checkResume checks that c, the cursor of the cut reply got of rep, is
// at or before the first entry got left out of rep's lists in page order.
func checkResume(t *testing.T, rep, got *kept.Reply, c kept.DiffCursor) {
	t.Helper()
	for i, s := range rep.Streams {
		g := kept.StreamChange{Keys: &kept.KeyChanges{}} // a short reply shows no stream
		if len(got.Streams) > 0 {
			g = got.Streams[i]
		}
		lists := [][2][]string{{s.AppendedSeqs, g.AppendedSeqs}, {s.RemovedSeqs, g.RemovedSeqs}}
		if s.Keys != nil {
			lists = append(lists, [2][]string{s.Keys.Names, g.Keys.Names}, [2][]string{nil, nil})
		}
		for li, l := range lists {
			if len(l[1]) == len(l[0]) {
				continue
			}
			if c.Stream != s.Stream || c.List != kept.DiffLists[li] {
				t.Fatalf("first list cut is %s/%s, the cursor names %s/%s", s.Stream, kept.DiffLists[li], c.Stream, c.List)
			}
			want := kept.ResumeAt(s.Stream, kept.DiffLists[li], l[1])
			if *want != c {
				t.Fatalf("cursor %+v, want %+v", c, *want)
			}
			return
		}
	}
}

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
