package verbs

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// A NATS server refuses a publish the user's permissions do not allow with
// -ERR 'Permissions Violation for Publish to "<subject>"', which nats.go
// reports only to the connection's async error handler: the request itself
// would wait for its whole timeout. So a Client watches that handler for the
// subjects of its requests in flight. The watch is installed once per
// connection and chains the handler that was set before it, which still sees
// every error.

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

var watched = struct {
	sync.Mutex
	conns map[*nats.Conn]*denials
}{conns: map[*nats.Conn]*denials{}}

// hook is the error handler the watch installs; every one it makes has the
// same code, which tells whether a connection's handler is a watch.
func hook(d *denials, prev nats.ErrHandler) nats.ErrHandler {
	return func(nc *nats.Conn, sub *nats.Subscription, err error) {
		if d != nil && errors.Is(err, nats.ErrPermissionViolation) {
			d.refused(err.Error())
		}
		if prev != nil {
			prev(nc, sub, err)
		}
	}
}

var hookCode = reflect.ValueOf(hook(nil, nil)).Pointer()

// watchDenials returns nc's watch, installing its error handler unless the
// connection's handler is one already (another handler set since, such as a
// micro service's, is chained in turn).
func watchDenials(nc *nats.Conn) *denials {
	watched.Lock()
	defer watched.Unlock()
	for c := range watched.conns {
		if c.IsClosed() {
			delete(watched.conns, c)
		}
	}
	d := watched.conns[nc]
	if d == nil {
		d = &denials{waiters: map[string]map[*waiter]struct{}{}}
		watched.conns[nc] = d
	}
	if h := nc.ErrorHandler(); h == nil || reflect.ValueOf(h).Pointer() != hookCode {
		nc.SetErrorHandler(hook(d, h))
	}
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

// deniedError is a refusal by the server: keeper.ErrDenied for errors.Is.
type deniedError struct{ said string }

func (e *deniedError) Error() string { return e.said }
func (e *deniedError) Unwrap() error { return keeper.ErrDenied }
