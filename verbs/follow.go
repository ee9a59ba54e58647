package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-keeper/nats-keeper/kept"
)

// DefaultRecoveryWait is how long a Client follows the recovery of a verb
// whose keeper stopped answering before it says the verb was cut short
// (WithRecoveryWait). A keeper finishes or undoes an interrupted restore
// once the dead keeper's lease has expired (kept.DefaultLeaseTTL, 30s, or
// at once when the keeper that died ran on the same host) and its next look
// for interrupted restores comes (every 15s), and then takes as long as the
// restore takes.
const DefaultRecoveryWait = 2 * time.Minute

const (
	// beatSilence is how long a Client hears no beat of its keeper before
	// it asks whether the keeper still lives ($SRV.PING.nats-keeper.<id>).
	beatSilence = 3 * BeatEvery
	// pingWait bounds that question; a keeper that does not answer it twice
	// in a row, or that the server says no one answers for, stopped.
	pingWait = 2 * time.Second
	// followEvery is how often a Client reads a restore's journal while
	// it follows the recovery.
	followEvery = time.Second
)

// WithRecoveryWait sets how long a Client follows the recovery of a verb
// whose keeper stopped answering, for the outcome (default
// DefaultRecoveryWait; 0 or less: the default). A deadline on the context,
// if earlier, wins.
func WithRecoveryWait(d time.Duration) ClientOption {
	return clientOption(func(c *clientConfig) { c.recoveryWait = d })
}

// result is a request's reply, or why none came.
type result struct {
	msg *nats.Msg
	err error
}

// settled is what following a verb whose keeper stopped answering found: a
// reply (recovery finished it) or an error that says what happened. Do
// returns it as it stands.
type settled struct {
	rep *kept.Reply
	err error
}

func (s *settled) Error() string {
	if s.err != nil {
		return s.err.Error()
	}
	return s.rep.Said
}

// exchange sends body to subject asking for beats, and waits for the reply;
// if the keeper that took the request stops answering, it follows the
// recovery instead, and returns a *settled error with the outcome.
func (c *Client) exchange(ctx context.Context, verb, subject string, r kept.Request, body []byte) (*nats.Msg, error) {
	w := c.watch(verb, r)
	defer w.close()
	msg := nats.NewMsg(subject)
	msg.Data = body
	if w.inbox != "" {
		msg.Header.Set(BeatHeader, w.inbox)
	}
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan result, 1)
	go func() {
		m, err := c.request(reqCtx, msg)
		res <- result{m, err}
	}()
	return w.wait(ctx, res)
}

// wait waits for the reply while the keeper beats. When the beats stop and
// the keeper does not answer its PING, it follows the recovery; when a beat
// comes again meanwhile, it waits again.
func (w *watch) wait(ctx context.Context, res <-chan result) (*nats.Msg, error) {
	var last *Beat
	var heard time.Time // when the last beat came
	silence := time.NewTimer(time.Hour)
	silence.Stop()
	defer silence.Stop()
	misses := 0
	for {
		select {
		case r := <-res:
			return r.msg, r.err
		case b := <-w.beats:
			if last == nil || b.ID == last.ID {
				last, heard, misses = &b, time.Now(), 0
				silence.Reset(beatSilence)
			}
		case <-silence.C:
			switch w.c.ping(ctx, last.ID) {
			case nil:
				misses = 0
				silence.Reset(beatSilence)
				continue
			case errPingTimeout:
				if misses++; misses < 2 {
					silence.Reset(BeatEvery)
					continue
				}
			}
			m, back, err := w.follow(ctx, res, *last, heard)
			if !back {
				return m, err
			}
			heard, misses = time.Now(), 0
			silence.Reset(beatSilence)
		}
	}
}

var (
	errPingTimeout = errors.New("no answer to the PING in time")
	errPingNone    = errors.New("no one answers the PING")
)

// ping asks the keeper id whether it lives: nil when it answers.
func (c *Client) ping(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	_, err := c.nc.RequestWithContext(ctx, "$SRV.PING."+ServiceName+"."+id, nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrNoResponders):
		return errPingNone
	}
	return errPingTimeout
}

// follow follows the recovery of the verb whose keeper (last.ID) stopped
// answering (its last beat came at heard), for up to the recovery wait: the reply, if it comes after all;
// the act that finished or undid the verb (a *settled error); or, when the
// wait ends with neither, a *settled error of kind kept.ErrCutShort. back
// is set when the keeper beats again: it lives, and the caller waits on.
func (w *watch) follow(ctx context.Context, res <-chan result, last Beat, heard time.Time) (msg *nats.Msg, back bool, err error) {
	f := &following{w: w, last: last, heard: heard, lost: time.Now()}
	end := time.NewTimer(w.c.recoveryWait)
	defer end.Stop()
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	f.readJournal(ctx)
	for {
		select {
		case r := <-res:
			return r.msg, false, r.err
		case b := <-w.beats:
			if b.ID == last.ID {
				return nil, true, nil
			}
		case a := <-w.acts:
			if s := f.outcome(ctx, a); s != nil {
				return nil, false, s
			}
		case <-tick.C:
			f.readJournal(ctx)
		case <-end.C:
			return nil, false, f.cutShort()
		case <-ctx.Done():
			return nil, false, f.cutShort()
		}
	}
}

// decodeAct reads one message of the acts subjects (outside input: any
// publisher allowed there may write one), nil when it is not an act.
func decodeAct(m *nats.Msg) *kept.Act {
	var a kept.Act
	if len(m.Data) > 1<<20 || json.Unmarshal(m.Data, &a) != nil || a.Verb == "" {
		return nil
	}
	return &a
}
