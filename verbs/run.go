package verbs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/kept"
)

// One request, after handler (service.go) took it and started its beats
// (beat.go): run decodes it, calls the engine and replies (replies.go) or
// fails; request holds its figures and sends its reply.

func (s *Service) run(verb string, req *request) {
	start := time.Now()
	r, err := DecodeRequest(verb, req.Data())
	if err != nil {
		s.fail(req, verb, err)
		return
	}
	r.BusIdentity = s.identityOf(req.msg)
	f := &flight{verb: verb, module: r.Module, local: r.Local, caller: r.Caller, since: start}
	s.mu.Lock()
	s.flights[f] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.flights, f)
		s.mu.Unlock()
	}()
	log := s.log.With("verb", verb, "module", r.Module, "local", r.Local, "caller", r.Caller, "bus_identity", r.BusIdentity.String())
	ctx := s.base
	if v, _ := kept.LookupVerb(verb); v.Weight != kept.Light { // a heavy verb reports its progress
		p := newProgress(s.nc, s.prefix, r.Module, r.Local)
		ctx = kept.WithProgress(ctx, func(pr kept.Progress) { p.publish(pr) })
	}
	ctx = kept.WithReplyBound(ctx, s.replyBound())
	ctx, cancel := s.verbContext(ctx)
	defer cancel()
	reply, err := s.call(ctx, verb, r)
	err = s.timedOut(ctx, verb, err)
	if err != nil {
		log.Warn("verb failed", "code", Code(err), "error", err, "took", time.Since(start))
		s.fail(req, verb, err)
		return
	}
	if reply == nil || reply.Said == "" {
		s.fail(req, verb, fmt.Errorf("%w: the keeper gave %s no reply sentence; what it did is in its log and acts", kept.ErrFailed, verb))
		return
	}
	log.Info("verb done", "said", reply.Said, "took", time.Since(start))
	s.respond(req, verb, reply, log)
}

func (s *Service) call(ctx context.Context, verb string, r kept.Request) (rep *kept.Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s stopped on an internal error (%v); see the keeper's log", kept.ErrFailed, verb, p)
		}
	}()
	if h, ok := s.handlers[verb]; ok {
		return h(ctx, r)
	}
	return nil, badRequest(verb, "is not a verb of nats-keeper")
}

func (s *Service) fail(req *request, verb string, err error) {
	eb := s.boundErrorBody(bodyOf(err))
	req.retry = retryAfter(err)
	body, _ := json.Marshal(eb)
	if rerr := req.Error(eb.Code, eb.Error, body); rerr != nil {
		s.log.Error("could not send the error reply", "verb", verb, "error", rerr, "said", eb.Error)
	}
}

// request is one request to an endpoint. Its figures are recorded just before
// its reply is sent, so that whoever has the reply sees them in $SRV.STATS.
type request struct {
	msg      *nats.Msg
	ep       *endpoint
	start    time.Time
	recorded bool
	observe  func(verb string, code int, took time.Duration) // nil: none
	retry    string                                          // the Retry-After header of a failure, if any
	free     func()                                          // gives back its slot; nil: it holds none
}

func (r *request) Data() []byte { return r.msg.Data }

// record counts the request once: its time until now, and for a failure its
// code and sentence. It gives back the request's slot first: whoever has the
// reply may send the next heavy verb at once and must find the slot free.
func (r *request) record(code int, said string) {
	if r.recorded {
		return
	}
	r.recorded = true
	r.release()
	took := time.Since(r.start)
	r.ep.done(took, code, said)
	if r.observe != nil {
		if code == 0 {
			code = 200
		}
		r.observe(r.ep.verb, code, took)
	}
}

// release gives back the request's slot, once.
func (r *request) release() {
	if r.free != nil {
		r.free()
		r.free = nil
	}
}

// Respond sends a success reply.
func (r *request) Respond(body []byte) error {
	r.record(0, "")
	return r.msg.Respond(body)
}

// Error sends a failure reply with the micro error headers.
func (r *request) Error(code int, said string, body []byte) error {
	said = headerText(said)
	r.record(code, said)
	reply := nats.NewMsg(r.msg.Reply)
	reply.Header.Set(micro.ErrorHeader, said)
	reply.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(code))
	if r.retry != "" {
		reply.Header.Set(RetryAfterHeader, r.retry)
	}
	reply.Data = body
	return r.msg.RespondMsg(reply)
}

// headerText makes a sentence safe for a NATS header: one line, bounded.
func headerText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 1024 {
		cut := 1024
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
