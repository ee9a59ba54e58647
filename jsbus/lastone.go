package jsbus

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// lastOne is LastBySubject of a filter that names one subject: one
// STREAM.MSG.GET of its last message, answered by the stream's leader with
// the headers as stored, instead of an ordered consumer made, read and
// deleted for one message. A logical restore asks it once per key it
// checks.
func (a *Adapter) lastOne(ctx context.Context, stream, subject string, fn func(keeper.Message) error) error {
	var resp storedGet // its Error is left to request, which decodes it first
	err := a.request(ctx, "$JS.API.STREAM.MSG.GET."+stream, map[string]string{"last_by_subj": subject}, &resp)
	switch {
	case isCode(err, codeNoMessage):
		return nil
	case isCode(err, codeStreamNotFound):
		return noStream(stream, err)
	case err != nil:
		return busErr(fmt.Errorf("jsbus: read the last message of %s on stream %s: %w", subject, stream, err))
	}
	m := resp.Message
	if m.Subject != subject {
		return fmt.Errorf("jsbus: the last message of %s on stream %s came back on %q", subject, stream, m.Subject)
	}
	return fn(keeper.Message{Seq: m.Seq, Time: m.Time.UnixNano(), Subject: m.Subject, Header: m.Header, Data: m.Data})
}

// oneSubject reports a filter without wildcards: it names one subject.
func oneSubject(filter string) bool { return !strings.ContainsAny(filter, "*>") }
