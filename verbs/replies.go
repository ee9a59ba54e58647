package verbs

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-keeper/nats-keeper/kept"
)

// replyMargin is what the bound of a reply leaves of the connection's max
// payload for headers.
const replyMargin = 4 << 10

// replyBound is the bytes a reply's body may have: the connection's max
// payload, read from the connection as the server announced it, less
// replyMargin.
func (s *Service) replyBound() int {
	mp := int(s.nc.MaxPayload())
	if mp <= 0 {
		mp = 1 << 20 // not connected now: NATS's default
	}
	return max(mp-replyMargin, mp/2)
}

// respond sends the reply of a verb that was done, cut to fit the max
// payload (kept.BoundReply). A reply the connection still refuses is
// followed by a short one (kept.ShortReply) that says the verb was done,
// so the caller never waits out its timeout for a verb that was done.
func (s *Service) respond(req *request, verb string, reply *kept.Reply, log *slog.Logger) {
	bound := s.replyBound()
	shaped := kept.BoundReply(verb, reply, bound)
	// A cut reply is the reply working as documented (a module of 2,000
	// consumers gets one every time): information; one cut to the short
	// reply lost what the caller asked for: a warning.
	switch {
	case shaped.Cut != nil && shaped.Cut.Short:
		log.Warn("the reply was over the connection's max payload even when cut; the short reply was sent", "bytes", shaped.Cut.Bytes, "max", bound)
	case shaped.Cut != nil:
		log.Info("the reply was over the connection's max payload and was cut", "bytes", shaped.Cut.Bytes, "max", bound)
	}
	body, err := json.Marshal(shaped)
	if err == nil {
		if err = req.Respond(body); err == nil {
			return
		}
	}
	log.Error("could not send the reply; the verb was done; sending a short one", "error", err, "bytes", len(body))
	short, serr := json.Marshal(kept.ShortReply(verb, reply, len(body), bound, err))
	if serr == nil {
		serr = req.msg.Respond(short) // the request was counted by the first try
	}
	if serr != nil {
		log.Error("could not send the short reply either; the verb was done", "error", serr)
	}
}

// boundErrorBody keeps a failure's body under the reply bound: an evidence
// report too long to send is left out, and the sentence says where it is.
func (s *Service) boundErrorBody(eb ErrorBody) ErrorBody {
	body, err := json.Marshal(eb)
	if err != nil || len(body) <= s.replyBound() || eb.Evidence == nil {
		return eb
	}
	dir := eb.Evidence.Dir
	eb.Evidence = nil
	eb.Error = fmt.Sprintf("%s (the evidence report, %d bytes with it, was over the connection's max payload: it is evidence.json in the store under %s)",
		eb.Error, len(body), dir)
	return eb
}
