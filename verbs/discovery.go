package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The service answers the micro discovery protocol ($SRV.PING, $SRV.INFO and
// $SRV.STATS, each for all services, for nats-keeper, and for this instance)
// itself, with micro's own types and subjects, so that `nats micro ls`, `info`,
// `stats` and `ping` see it as they see any micro service. It does so instead
// of micro.AddService because micro times only a handler's call and counts an
// error only when the handler answered with req.Error before it returned,
// while one endpoint's handler runs its requests one at a time: a verb must
// run in its own goroutine, and micro's figures would then be false. Here each
// endpoint's figures cover the whole verb, from the request's arrival to its
// reply.

// endpoint is one verb's subscription and its figures.
type endpoint struct {
	verb    string
	subject string
	sub     *nats.Subscription

	mu       sync.Mutex
	requests int
	errors   int
	lastErr  string
	took     time.Duration
	inFlight int
}

// done records one request answered after took; said is the error sentence
// of a failure reply ("" for success), code its wire code.
func (e *endpoint) done(took time.Duration, code int, said string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests++
	e.took += took
	if said != "" {
		e.errors++
		e.lastErr = strconv.Itoa(code) + ":" + said // as micro writes it: "code:description"
	}
}

func (e *endpoint) enter(d int) {
	e.mu.Lock()
	e.inFlight += d
	e.mu.Unlock()
}

// stats is the endpoint's figures for $SRV.STATS. Its `data` holds
// in_flight, the verbs begun and not yet answered, and what more gives for
// the verb (WithStatsData), which is asked outside the endpoint's lock.
func (e *endpoint) stats(more func(verb string) map[string]any) *micro.EndpointStats {
	e.mu.Lock()
	st := &micro.EndpointStats{
		Name: e.verb, Subject: e.subject, QueueGroup: QueueGroup,
		NumRequests: e.requests, NumErrors: e.errors, LastError: e.lastErr,
		ProcessingTime: e.took,
	}
	if e.requests > 0 {
		st.AverageProcessingTime = e.took / time.Duration(e.requests)
	}
	data := map[string]any{"in_flight": e.inFlight}
	e.mu.Unlock()
	if more != nil {
		for k, v := range more(e.verb) {
			if k != "in_flight" {
				data[k] = v
			}
		}
	}
	st.Data, _ = json.Marshal(data)
	return st
}

// identity is the service's micro identity.
func (s *Service) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: ServiceName, ID: s.id, Version: s.version, Metadata: maps.Clone(s.metadata)}
}

// Info is the service's info, as `nats micro info` shows it.
func (s *Service) Info() micro.Info {
	info := micro.Info{
		ServiceIdentity: s.identity(),
		Type:            micro.InfoResponseType,
		Description:     description,
		Endpoints:       make([]micro.EndpointInfo, 0, len(s.endpoints)),
	}
	for _, e := range s.endpoints {
		info.Endpoints = append(info.Endpoints, micro.EndpointInfo{Name: e.verb, Subject: e.subject, QueueGroup: QueueGroup})
	}
	return info
}

// Stats is the service's statistics, as `nats micro stats` shows them: per
// verb, the requests answered, the failure replies among them and the last
// one, and the time from each request's arrival to its reply.
func (s *Service) Stats() micro.Stats {
	st := micro.Stats{
		ServiceIdentity: s.identity(),
		Type:            micro.StatsResponseType,
		Started:         s.started,
		Endpoints:       make([]*micro.EndpointStats, 0, len(s.endpoints)),
	}
	for _, e := range s.endpoints {
		st.Endpoints = append(st.Endpoints, e.stats(s.statsData))
	}
	return st
}

func (s *Service) ping() micro.Ping {
	return micro.Ping{ServiceIdentity: s.identity(), Type: micro.PingResponseType}
}

// subscribeDiscovery answers PING, INFO and STATS on the three subjects of
// each: for every service, for nats-keeper, and for this instance's id.
func (s *Service) subscribeDiscovery() error {
	for _, v := range []struct {
		verb  micro.Verb
		value func() any
	}{
		{micro.PingVerb, func() any { return s.ping() }},
		{micro.InfoVerb, func() any { return s.Info() }},
		{micro.StatsVerb, func() any { return s.Stats() }},
	} {
		for _, scope := range [][2]string{{"", ""}, {ServiceName, ""}, {ServiceName, s.id}} {
			subject, err := micro.ControlSubject(v.verb, scope[0], scope[1])
			if err != nil {
				return err
			}
			value := v.value
			sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) {
				body, err := json.Marshal(value())
				if err == nil {
					err = m.Respond(body)
				}
				if err != nil && !errors.Is(err, nats.ErrMsgNoReply) {
					s.log.Warn("could not answer a service discovery request", "subject", m.Subject, "error", err)
				}
			})
			if err != nil {
				return fmt.Errorf("could not subscribe to %s: %w", subject, err)
			}
			s.control = append(s.control, sub)
		}
	}
	return nil
}
