package keeper

import (
	"sync"
	"time"
)

// holder is who holds one kept data.
type holder struct {
	Verb   string
	Caller string
	Since  time.Time
}

// locks keeps two verbs off the same kept data within one keeper.
type locks struct {
	mu   sync.Mutex
	held map[string]holder
}

// take locks module/local for verb, or returns an error wrapping ErrBusy
// that names the holder and since when.
func (l *locks) take(module, local, verb, caller string, now time.Time) (release func(), err error) {
	key := module + "/" + local
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[key]; ok {
		who := h.Caller
		if who == "" {
			who = "an unnamed caller"
		}
		return nil, heldBy(h.Caller, Errorf(ErrBusy, "%s is held by %s for %s since %s", key, who, h.Verb,
			h.Since.UTC().Format(time.RFC3339)))
	}
	if l.held == nil {
		l.held = map[string]holder{}
	}
	l.held[key] = holder{Verb: verb, Caller: caller, Since: now}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.held, key)
			l.mu.Unlock()
		})
	}, nil
}

// capturing is a busy kept data's error when its holder is the capture
// taking its base: a verb waits for it (lock) rather than refuse.
type capturing struct{ error }

func (e capturing) Unwrap() error { return e.error }

// heldBy marks err as capturing when caller is the capture's.
func heldBy(caller string, err error) error {
	if caller == captureCaller {
		return capturing{err}
	}
	return err
}
