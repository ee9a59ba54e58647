package jsbus

import "context"

// WithTimeout is withTimeout, for the package's external tests: they
// shorten the wait for a server that does not answer.
var WithTimeout = withTimeout

// LoseAdvisories makes a's census watch forget every stream it heard may
// hold a consumer, as if those advisories had been lost while the
// connection stayed up and none was counted dropped.
func LoseAdvisories(a *Adapter) error {
	if err := a.census.catchUp(context.Background()); err != nil {
		return err
	}
	a.census.mu.Lock()
	defer a.census.mu.Unlock()
	clear(a.census.with)
	return nil
}

// LoseStreamAdvisory makes a's census watch forget the stream name, as if
// the advisory of its creation had been lost while the connection stayed
// up and none was counted dropped.
func LoseStreamAdvisory(a *Adapter, name string) error {
	if err := a.census.catchUp(context.Background()); err != nil {
		return err
	}
	a.census.mu.Lock()
	defer a.census.mu.Unlock()
	delete(a.census.names, name)
	return nil
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
