package verbs

import (
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// A NATS server refuses a publish the user's permissions do not allow with
// -ERR 'Permissions Violation for Publish to "<subject>"', which nats.go
// reports only to the connection's async error handler: the request itself
// would wait for its whole timeout. So a Client watches that handler for the
// subjects of its requests in flight. The watch is installed once per
// Client (NewClient) and chains the handler that was set before it, which
// still sees every error.

var (
	publishDenied   = regexp.MustCompile(`(?i)publish to "([^"]+)"`)
	subscribeDenied = regexp.MustCompile(`(?i)subscription to "([^"]+)"`)
)

// denials is one connection's watch: the requests in flight by the subject
// whose refusal ends them.
type denials struct {
	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
}

// waiter is one request: deny is called once, with the key of the refused
// subject ("pub <subject>" or "sub <subject>") and the server's sentence.
type waiter struct {
	once sync.Once
	deny func(key, said string)
}

// watchDenials installs a watch on nc's error handler, chaining the handler
// set before it, and returns it. Each Client installs its own, once.
func watchDenials(nc *nats.Conn) *denials {
	d := &denials{waiters: map[string]map[*waiter]struct{}{}}
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			d.refused(err.Error())
		}
		if prev != nil {
			prev(nc, sub, err)
		}
	})
	return d
}

// wait registers deny for the refusal of any of subjects (keys "pub
// <subject>" or "sub <subject>") until the returned function is called.
func (d *denials) wait(deny func(key, said string), subjects ...string) (done func()) {
	w := &waiter{deny: deny}
	d.mu.Lock()
	for _, s := range subjects {
		if d.waiters[s] == nil {
			d.waiters[s] = map[*waiter]struct{}{}
		}
		d.waiters[s][w] = struct{}{}
	}
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		for _, s := range subjects {
			delete(d.waiters[s], w)
			if len(d.waiters[s]) == 0 {
				delete(d.waiters, s)
			}
		}
		d.mu.Unlock()
	}
}

// refused tells the requests waiting on the subject a violation names.
func (d *denials) refused(said string) {
	var subject string
	if m := publishDenied.FindStringSubmatch(said); m != nil {
		subject = "pub " + m[1]
	} else if m := subscribeDenied.FindStringSubmatch(said); m != nil {
		subject = "sub " + m[1]
	} else {
		return
	}
	if i := strings.Index(strings.ToLower(said), "permissions violation for"); i >= 0 {
		said = said[i:] // the server's own words, without nats.go's prefix
	}
	d.mu.Lock()
	ws := make([]*waiter, 0, len(d.waiters[subject]))
	for w := range d.waiters[subject] {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	for _, w := range ws {
		w.once.Do(func() { w.deny(subject, said) })
	}
}

// replySubscription is the subject of nc's subscription for the replies of
// its requests.
func replySubscription(nc *nats.Conn) string {
	inbox := nc.NewRespInbox()
	return inbox[:strings.LastIndexByte(inbox, '.')+1] + "*"
}
