package verbs

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-keeper/nats-keeper/kept"
)

// ProgressEvery is the least time between two progress messages of one verb.
const ProgressEvery = 250 * time.Millisecond

// ProgressSubject is where the verbs on module's kept data local report
// kept.Progress as JSON.
func ProgressSubject(prefix, module, local string) string {
	return prefix + ".progress." + module + "." + local
}

// progress publishes one verb's progress, at most once per ProgressEvery; the
// reply, not progress, tells that the verb ended.
type progress struct {
	nc      *nats.Conn
	subject string

	mu   sync.Mutex
	last time.Time
}

func newProgress(nc *nats.Conn, prefix, module, local string) *progress {
	return &progress{nc: nc, subject: ProgressSubject(prefix, module, local)}
}

// publish sends pr unless one was sent less than ProgressEvery ago, and says
// whether it sent it.
func (p *progress) publish(pr kept.Progress) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.last) < ProgressEvery {
		return false
	}
	b, err := json.Marshal(pr)
	if err != nil {
		return false
	}
	p.last = now
	return p.nc.Publish(p.subject, b) == nil // progress is best effort
}
