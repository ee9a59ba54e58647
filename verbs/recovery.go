package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/kept"
)

// watch is what a Client hears while one request runs: the beats of the
// keeper that took it, and, for the verbs whose outcome recovery may
// settle (restore-kept, snapshot-kept), the acts of that verb on the kept
// data, from <prefix>.acts.<verb>. A subscription that cannot be made is
// done without: no beats means waiting for the reply as before.
type watch struct {
	c     *Client
	verb  string
	r     kept.Request
	inbox string // where the beats come; "" without
	beats chan Beat
	acts  chan kept.Act
	subs  []*nats.Subscription
}

func (c *Client) watch(verb string, r kept.Request) *watch {
	w := &watch{c: c, verb: verb, r: r, beats: make(chan Beat, 8), acts: make(chan kept.Act, 64)}
	inbox := c.nc.NewInbox()
	sub, err := c.nc.Subscribe(inbox, func(m *nats.Msg) {
		var b Beat
		if len(m.Data) <= 4<<10 && json.Unmarshal(m.Data, &b) == nil && b.ID != "" && !strings.ContainsAny(b.ID, ".*> \t\r\n") {
			select {
			case w.beats <- b:
			default: // a beat only says the keeper lives; one waiting says it already
			}
		}
	})
	if err == nil {
		w.inbox, w.subs = inbox, append(w.subs, sub)
	}
	if (verb != kept.VerbRestore && verb != kept.VerbSnapshot) || r.Module == "" || r.Local == "" || r.DryRun {
		return w
	}
	sub, err = c.nc.Subscribe(c.prefix+".acts."+verb, func(m *nats.Msg) {
		if a := decodeAct(m); a != nil && a.Verb == verb && a.Module == r.Module && a.Local == r.Local {
			select {
			case w.acts <- *a:
			default:
			}
		}
	})
	if err == nil {
		w.subs = append(w.subs, sub)
	}
	return w
}

func (w *watch) close() {
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
}

// following is one verb followed after its keeper stopped answering.
type following struct {
	w     *watch
	last  Beat      // the keeper's last beat
	heard time.Time // when it came
	lost  time.Time // when the client found the keeper stopped

	kv      jetstream.KeyValue // the index, once opened
	journal *journalSeen       // the restore's journal as last read; nil: none seen
}

// journalSeen is what a restore journal says that the caller needs.
type journalSeen struct {
	Aside string `json:"aside"`
	Step  string `json:"step"`
}

// readJournal reads the restore's journal, journal.<module>.<local>, from
// the index the keeper's beats named, when it can; what it cannot read is
// left as last read.
func (f *following) readJournal(ctx context.Context) {
	if f.w.verb != kept.VerbRestore || f.last.Index == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	if f.kv == nil {
		js, err := jetstream.New(f.w.c.nc)
		if err != nil {
			return
		}
		if f.kv, err = js.KeyValue(ctx, f.last.Index); err != nil {
			f.kv = nil
			return
		}
	}
	e, err := f.kv.Get(ctx, "journal."+f.w.r.Module+"."+f.w.r.Local)
	if err != nil {
		return
	}
	var j journalSeen
	if len(e.Value()) <= 1<<20 && json.Unmarshal(e.Value(), &j) == nil {
		f.journal = &j
	}
}

// cut is the beginning of every sentence: which verb, and that its keeper
// stopped answering.
func (f *following) cut() string {
	return fmt.Sprintf("%s of %s/%s was cut short: the keeper that ran it (nats-keeper service %s) stopped answering "+
		"(no beat for %s, and no answer to its PING)",
		f.w.verb, f.w.r.Module, f.w.r.Local, f.last.ID, f.lost.Sub(f.heard).Round(time.Second))
}

// aside is the aside id the journal named, or "".
func (f *following) aside() string {
	if f.journal == nil {
		return ""
	}
	return f.journal.Aside
}

// findAside is the id of the aside the verb made, when the journal was not
// read in time to name it (recovery closed it first): the first aside of the
// kept data set aside for a restore since the verb began, as list-kept
// (asked of any keeper) gives it, or "". Its time and the beat's are the
// same keeper's clock.
func (f *following) findAside(ctx context.Context) string {
	if id := f.aside(); id != "" {
		return id
	}
	ctx, cancel := context.WithTimeout(ctx, 2*pingWait)
	defer cancel()
	rep, err := f.w.c.ListAllKept(ctx, kept.Request{Module: f.w.r.Module, Local: f.w.r.Local})
	if err != nil {
		return ""
	}
	var first *kept.Aside
	for i, a := range rep.Asides {
		if a.Module == f.w.r.Module && a.Local == f.w.r.Local && a.Reason != kept.ReasonRecovery && a.Reason != kept.ReasonReplaced && !a.Taken.Before(f.last.Since) &&
			(first == nil || a.Taken.Before(first.Taken)) {
			first = &rep.Asides[i]
		}
	}
	if first == nil {
		return ""
	}
	return first.ID
}

// outcome is what act a says of the verb followed, or nil when it is not
// its outcome: a restore-kept of the same kept data and why that is done,
// rolled back or failed (the keeper that ran it, or the recovery that took
// it up, records one), or a snapshot-kept of the same point that is done.
func (f *following) outcome(ctx context.Context, a kept.Act) *settled {
	var rep kept.Reply
	detail := len(a.Detail) > 0 && json.Unmarshal(a.Detail, &rep) == nil && rep.Said != ""
	if f.w.verb == kept.VerbSnapshot {
		if a.Outcome != "done" || !detail || rep.Point == nil || rep.Point.Form != f.w.r.Form || rep.Point.Fingerprint != f.w.r.Fingerprint {
			return nil
		}
		rep.Said = f.cut() + ", but it had taken the restore point: " + rep.Said
		return &settled{rep: &rep}
	}
	if a.Why != f.w.r.Why {
		return nil
	}
	switch a.Outcome {
	case "done":
		if !detail {
			rep = kept.Reply{Said: a.What}
		}
		if aside := ""; rep.Aside == nil {
			if aside = f.findAside(ctx); aside != "" {
				rep.Aside = &kept.Aside{ID: aside, Module: f.w.r.Module, Local: f.w.r.Local}
			}
		}
		rep.Said = f.cut() + "; recovery finished it: " + rep.Said
		return &settled{rep: &rep}
	case "rolled back":
		note := ""
		if aside := f.findAside(ctx); aside != "" {
			note = fmt.Sprintf(" (its set-aside copy %s stays)", aside)
		}
		return &settled{err: kept.Errorf(kept.ErrFailed, "%s; recovery undid it, so the point was not restored and the live data is back on the bus%s: %s", f.cut(), note, a.What)}
	case "failed":
		return &settled{err: kept.Errorf(kept.ErrFailed, "%s; it ended failed: %s", f.cut(), a.What)}
	}
	return nil
}

// cutShort is the outcome when the wait ended with none known.
func (f *following) cutShort() *settled {
	waited := time.Since(f.lost).Round(time.Second)
	var next string
	switch {
	case f.w.verb == kept.VerbRestore && f.aside() != "":
		next = fmt.Sprintf("its restore journal stands at step %s with the live data set aside as %s, and a keeper's recovery will finish or undo it; "+
			"see list-kept and `nats-keeper acts` before trying again", f.journal.Step, f.aside())
	case f.w.verb == kept.VerbRestore && f.journal != nil:
		next = fmt.Sprintf("its restore journal stands at step %s, and a keeper's recovery will finish or undo it; see list-kept and `nats-keeper acts` before trying again", f.journal.Step)
	case f.w.verb == kept.VerbRestore:
		next = "if it had begun to change the bus, a keeper's recovery will finish or undo it (no journal of it could be read); see list-kept and `nats-keeper acts` before trying again"
	case f.w.verb == kept.VerbSnapshot:
		next = "no restore point of it was recorded as taken by then; take it again (what it left half-written is swept)"
	default:
		next = "what it did, if anything, is in the acts (`nats-keeper acts`); ask again"
	}
	return &settled{err: kept.Errorf(kept.ErrCutShort, "%s, and in the %s that followed no keeper finished or undid it; %s", f.cut(), waited, next)}
}

// isSettled is the outcome err carries, if it is one.
func isSettled(err error) (*settled, bool) {
	var s *settled
	return s, errors.As(err, &s)
}
