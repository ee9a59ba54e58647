package jsbus_test

import (
	"bytes"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestLastBySubjectOfOneSubject: a filter that names one subject gives its
// last message as stored (sequence, subject, raw headers, data), once, and
// a subject with no message gives none.
func TestLastBySubjectOfOneSubject(t *testing.T) {
	b := newBus(t)
	ordersStream(t, b.js, "ORDERS")
	want := publishMix(t, b.js, 300)
	for _, subject := range []string{"orders.0", "orders.3", "orders.6"} {
		var last sent
		for _, w := range want {
			if w.subject == subject {
				last = w
			}
		}
		var got []keeper.Message
		err := b.a.LastBySubject(testCtx(t), "ORDERS", subject, func(m keeper.Message) error {
			got = append(got, m)
			return nil
		})
		if err != nil || len(got) != 1 {
			t.Fatalf("LastBySubject(%s): %d messages, %v; want 1", subject, len(got), err)
		}
		g := got[0]
		if g.Seq != last.seq || g.Subject != subject || !bytes.Equal(g.Data, last.data) || g.Time == 0 {
			t.Errorf("LastBySubject(%s) gave #%d %s %q at %d, want #%d %q", subject, g.Seq, g.Subject, g.Data, g.Time, last.seq, last.data)
		}
		headerOK := len(last.headers) == 0 && g.Header == nil
		for _, h := range last.headers {
			headerOK = headerOK || bytes.Equal(g.Header, h)
		}
		if !headerOK {
			t.Errorf("LastBySubject(%s) gave headers %q, want one of %q", subject, g.Header, last.headers)
		}
	}
	err := b.a.LastBySubject(testCtx(t), "ORDERS", "orders.none", func(m keeper.Message) error {
		t.Errorf("a subject with no message gave #%d", m.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
