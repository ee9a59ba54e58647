package jsbus

import (
	"context"
	"encoding/json"
)

// A replicated stream's restored consumers may come back counting no
// message pending while messages wait for them. A consumer's leader counts
// its pending messages from its own server's copy of the stream when it
// takes the lead, and afterwards only adds new messages and takes off
// deliveries (nats-server 2.15.3: streamNumPending in setLeader). A
// replica that fetches the restored messages from the stream's leader
// counts again when that ends, yet a CI run saw both consumers of a
// restored R3 stream report 0 pending where 26 and 29 waited, seconds
// after the restore and its checks; some 300 restores here, under load, did not
// show it again, so the server's path to it is not pinned down. The
// messages are delivered all the same, but `nats consumer info`, a pull's
// pending count and a KV watcher's "initial values done" read that number.
//
// So once the restored consumers answer, the ones whose count is 0 with a
// message after their delivered sequence on their filters are looked at
// again after a pause, and those still at 0 are asked to hand the lead to
// another replica, whose leader counts afresh from its copy. The asks are
// bounded (pendingStepDowns per restore) and the wait by the adapter's
// timeout; a count still wrong then is logged, not an error: the data is
// whole.

// pendingStepDowns bounds the step-downs one restore asks of its consumers.
const pendingStepDowns = 6

// pendingChecks bounds the consumers one look checks for a wrong count
// (a message read each, or one per filter).
const pendingChecks = 64

// pendingLookFailures bounds the looks that may fail before the wait gives
// the counts up: a look fails when the cluster is between leaders (the
// server answers 10008 at once), which a restore on a cluster under load
// meets.
const pendingLookFailures = 3

// pendingCheck is what the restore's wait keeps between looks: the
// consumers found counting none pending at the last look that answered,
// those asked to step down so far, in order, and the looks that failed.
type pendingCheck struct {
	stream   string
	lastSeq  uint64
	suspects map[string]bool
	asked    []string
	failed   int
}

// settled reports whether the restore's wait may end as far as the counts
// go: no consumer of cs counts a wrong 0, or nothing more is to be done
// about those that do. A consumer found so at two looks in a row is asked
// to step down; a consumer of one replica is not (no other can lead it, and
// the server takes its step-down and gives it the same leader back), and
// once only such are left, pendingStepDowns were asked, or a step-down
// fails, the wait ends with a warning. A look the bus does not answer
// changes nothing (the next look goes on from the last that answered), and
// after pendingLookFailures such looks the wait ends with a warning: the
// count is a nicety the restore does not fail for.
func (p *pendingCheck) settled(ctx context.Context, a *Adapter, cs []rawConsumer) bool {
	done, err := p.look(ctx, a, cs)
	if err == nil {
		return done
	}
	if p.failed++; p.failed < pendingLookFailures {
		a.log.Debug("could not check the restored consumers' pending counts; looking again",
			"stream", p.stream, "err", err)
		return false
	}
	a.log.Warn("could not check the restored consumers' pending counts; going on",
		"stream", p.stream, "looks", p.failed, "err", err)
	return true
}

// look is one look of settled, with the bus's error when it did not answer.
func (p *pendingCheck) look(ctx context.Context, a *Adapter, cs []rawConsumer) (bool, error) {
	wrong, err := a.wrongZeroPending(ctx, p.stream, p.lastSeq, cs)
	if err != nil {
		return false, err
	}
	if len(wrong) == 0 {
		return true, nil
	}
	seen := p.suspects
	p.suspects = map[string]bool{}
	for _, w := range wrong {
		p.suspects[w.name] = true
	}
	var single []string // of one replica: a step-down cannot help them
	for _, w := range wrong {
		name := w.name
		if w.replicas == 1 {
			single = append(single, name)
			continue
		}
		if !seen[name] {
			continue // looked at again after a pause first
		}
		if len(p.asked) >= pendingStepDowns {
			a.log.Warn("restored consumers still count no message pending though some wait for them; their messages are delivered all the same",
				"stream", p.stream, "consumers", p.names(), "step-downs", len(p.asked))
			return true, nil
		}
		err := a.requestOnce(ctx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+p.stream+"."+name, nil, &struct{}{})
		if err != nil {
			a.log.Warn("a restored consumer counts no message pending though some wait for it, and its leader could not step down; its messages are delivered all the same",
				"stream", p.stream, "consumer", name, "err", err)
			return true, nil
		}
		p.asked = append(p.asked, name)
		a.log.Info("a restored consumer counted no message pending though some wait for it; its leader was asked to step down",
			"stream", p.stream, "consumer", name)
	}
	// Consumers of one replica alone are left as they are, once they were
	// looked at twice.
	if len(single) < len(wrong) || len(seen) == 0 {
		return false, nil
	}
	a.log.Warn("restored consumers of one replica count no message pending though some wait for them; no other replica can lead them and count afresh, and their messages are delivered all the same",
		"stream", p.stream, "consumers", single)
	return true, nil
}

// names is the consumers still counting a wrong 0, for a log line.
func (p *pendingCheck) names() []string {
	var out []string
	for n := range p.suspects {
		out = append(out, n)
	}
	return out
}

// wrongZeroPending gives the consumers of cs that count no message pending
// while a message after their delivered sequence matches their filters,
// checking at most pendingChecks of them.
func (a *Adapter) wrongZeroPending(ctx context.Context, stream string, lastSeq uint64, cs []rawConsumer) ([]wrongCount, error) {
	var wrong []wrongCount
	checked := 0
	for _, c := range cs {
		if c.NumPending != 0 || c.Delivered.Stream >= lastSeq {
			continue
		}
		if checked++; checked > pendingChecks {
			break
		}
		cfg, ok := countConfigOf(c.Config)
		if !ok {
			continue
		}
		found, err := a.messageAfter(ctx, stream, c.Delivered.Stream, cfg.filters())
		if err != nil {
			return nil, err
		}
		if found {
			wrong = append(wrong, wrongCount{name: c.Name, replicas: cfg.Replicas})
		}
	}
	return wrong, nil
}

// messageAfter reports whether the stream holds a message after seq on
// one of the subjects (any subject when there are none).
func (a *Adapter) messageAfter(ctx context.Context, stream string, seq uint64, subjects []string) (bool, error) {
	if len(subjects) == 0 {
		subjects = []string{">"}
	}
	for _, subj := range subjects {
		var resp msgGetResponse
		err := a.requestOnce(ctx, "$JS.API.STREAM.MSG.GET."+stream,
			map[string]any{"seq": seq + 1, "next_by_subj": subj}, &resp)
		if isCode(err, codeNoMessage) {
			continue
		}
		if err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// wrongCount is a consumer found counting a wrong 0, and its own replicas
// (0: its stream's).
type wrongCount struct {
	name     string
	replicas int
}

// countConfig is the part of a consumer configuration the check reads.
type countConfig struct {
	Filter   string   `json:"filter_subject"`
	Filters  []string `json:"filter_subjects"`
	Replicas int      `json:"num_replicas"`
}

// countConfigOf decodes it, and says whether it decoded.
func countConfigOf(cfg json.RawMessage) (countConfig, bool) {
	var c countConfig
	return c, json.Unmarshal(cfg, &c) == nil
}

// filters is the consumer's filter subjects.
func (c countConfig) filters() []string {
	if c.Filter != "" {
		return append(c.Filters, c.Filter)
	}
	return c.Filters
}
