package verbs

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// A keeper that runs a verb says so while it runs: when the request names a
// subject in its BeatHeader, the keeper publishes a Beat there at once and
// every BeatEvery until it has replied. A Client asks for beats, so that it
// knows which keeper took its request and can tell, within seconds, that
// the keeper stopped answering (it died, or lost the bus) instead of waiting
// out its whole timeout (see Client). A request without the header (`nats
// request`, or an older client) gets no beats: only its reply, as before.
const (
	// BeatHeader names the subject where the keeper sends its beats. It
	// must be a subject without wildcards, of at most maxBeatSubject
	// bytes, whose first token is the reply subject's (an inbox of the
	// same client); any other is ignored.
	BeatHeader = "Nats-Keeper-Beat"
	// BeatEvery is the time between two beats of one verb.
	BeatEvery = time.Second
)

const maxBeatSubject = 256

// Beat says that the keeper ID runs Verb, taken at Since (the keeper's
// clock), and where its state is: Index, the KV bucket of its index, where
// a restore's journal (journal.<module>.<local>) is.
type Beat struct {
	ID    string    `json:"id"`              // the keeper's micro service id ($SRV.PING.nats-keeper.<id>)
	Verb  string    `json:"verb"`            // the verb it runs
	Since time.Time `json:"since"`           // when the request reached it
	Index string    `json:"index,omitempty"` // its index's KV bucket, when known (WithIndexBucket)
}

// WithIndexBucket names the KV bucket of the keeper's index in the service's
// beats, so that a client whose keeper stopped answering can read a
// restore's journal there.
func WithIndexBucket(bucket string) ServeOption {
	return serveOption(func(c *serveConfig) { c.indexBucket = bucket })
}

// beatSubject is where m asks for beats, or "" when it asks for none or
// names a subject it may not.
func beatSubject(m *nats.Msg) string {
	if m.Header == nil || m.Reply == "" {
		return ""
	}
	to := m.Header.Get(BeatHeader)
	first := func(s string) string { t, _, _ := strings.Cut(s, "."); return t }
	if to == "" || len(to) > maxBeatSubject || strings.ContainsAny(to, "*> \t\r\n") ||
		strings.Contains(to, "..") || strings.HasSuffix(to, ".") || first(to) != first(m.Reply) {
		return ""
	}
	return to
}

// beat sends the beats m asks for, from now until the returned stop is
// called: one at once, then one every BeatEvery. Beats are best effort.
func (s *Service) beat(m *nats.Msg, verb string) (stop func()) {
	to := beatSubject(m)
	if to == "" {
		return func() {}
	}
	body, err := json.Marshal(Beat{ID: s.id, Verb: verb, Since: time.Now().UTC(), Index: s.indexBucket})
	if err != nil {
		return func() {}
	}
	_ = s.nc.Publish(to, body)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(BeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = s.nc.Publish(to, body)
			}
		}
	}()
	return func() { close(done) }
}
