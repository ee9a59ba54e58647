package jsbus

import (
	"context"
	"fmt"
	"time"
)

// WithTimeout is withTimeout, for the package's external tests: they
// shorten the wait for a server that does not answer.
var WithTimeout = withTimeout

// LoseAdvisories makes a's census watch forget every stream it heard may
// hold a consumer, as if those advisories had been lost while the
// connection stayed up and none was counted dropped. A consumer's advisory
// comes from the server's own queue and may follow the reply that made the
// consumer, so the watch is first let hear one for each of streams (at most
// 5 s): forgotten before it was heard, the advisory would come after and
// name the stream again, and nothing would have been lost.
func LoseAdvisories(a *Adapter, streams ...string) error {
	for try := 0; ; try++ {
		if err := a.census.catchUp(context.Background()); err != nil {
			return err
		}
		a.census.mu.Lock()
		heard := true
		for _, s := range streams {
			_, ok := a.census.with[s]
			heard = heard && ok
		}
		if heard {
			clear(a.census.with)
		}
		a.census.mu.Unlock()
		if heard {
			return nil
		}
		if try == 500 {
			return fmt.Errorf("the consumer advisories of streams %v were not heard in 5 s", streams)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LoseStreamAdvisory makes a's census watch forget the stream name, as if
// the advisory of its creation had been lost while the connection stayed
// up and none was counted dropped.
// A stream's advisory comes from the server's own queue and may follow the
// reply that made the stream, so the watch is first let hear it (at most
// 5 s): forgotten before it was heard, the advisory would come after and
// name the stream again, and nothing would have been lost.
func LoseStreamAdvisory(a *Adapter, name string) error {
	for try := 0; ; try++ {
		if err := a.census.catchUp(context.Background()); err != nil {
			return err
		}
		a.census.mu.Lock()
		heard := a.census.names[name]
		if heard {
			delete(a.census.names, name)
		}
		a.census.mu.Unlock()
		if heard {
			return nil
		}
		if try == 500 {
			return fmt.Errorf("the advisory of stream %s was not heard in 5 s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SetAdvisoryLimit bounds a's advisory subscriptions to n pending
// advisories, so that tests can make them drop some.
func SetAdvisoryLimit(a *Adapter, n int) error {
	for _, s := range a.census.subs {
		if err := s.SetPendingLimits(n, -1); err != nil {
			return err
		}
	}
	return nil
}

// AwaitReplicated is awaitReplicated, for the cluster test of its verdicts.
func AwaitReplicated(ctx context.Context, a *Adapter, stream string, replicas int, lastSeq uint64) error {
	return a.awaitReplicated(ctx, stream, replicas, restoreState{LastSeq: lastSeq})
}
