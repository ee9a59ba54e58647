package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// The end of a restore's evidence: concluded, written beside the aside it
// made (or the record of what it restored from), and said in the reply.

// evidenceRel is where a restore's evidence lies: beside the aside it made,
// or, with none, beside the record of what it restored from.
func evidenceRel(j *journal) string {
	if j.Aside != "" {
		return asideRel(j.Aside)
	}
	return j.Point
}

// finishEvidence concludes the run's evidence (its journal's), bounds it, and writes
// evidence.json and summary.md to the store. It returns the report (nil
// when the journal has none) and why it could not be written, if so.
func (x *restoreRun) finishEvidence(ctx context.Context) (*Evidence, error) {
	j := x.j
	ev := j.Evidence
	if ev == nil {
		return nil, nil
	}
	for i := range ev.Checks {
		c := &ev.Checks[i]
		var more int
		c.Streams, more = boundStreams(c.Streams)
		c.Omitted += more
	}
	ev.Dir = evidenceRel(j)
	if ev.PointSum == "" && j.Point != "" {
		if p, err := x.records.readHead(ctx, j.Point); err == nil {
			ev.PointSum = p.ArchiveSum
		}
	}
	ev.Conclude(x.now())
	steps := make([]any, 0, 2*len(ev.Steps)+2)
	steps = append(steps, "kept", j.Module+"/"+j.Local)
	for _, s := range ev.Steps {
		steps = append(steps, s.Step, s.Ended.Sub(s.Started).Round(time.Millisecond))
	}
	x.log.Debug("the restore's steps", steps...)
	if ev.Dir == "" {
		return ev, errors.New("it has no place in the store")
	}
	ctx = context.WithoutCancel(ctx)
	if j.Aside == "" && isAsideRel(ev.Dir) {
		// An aside put back into absent kept data: the aside keeps the
		// report of the restore that made it.
		there, err := x.records.exists(ctx, path.Join(ev.Dir, evidenceFile))
		if err != nil {
			return ev, err
		}
		if there {
			return ev, fmt.Errorf("aside %s keeps the report of the restore that made it", path.Base(ev.Dir))
		}
	}
	data, err := evidenceJSON(ev)
	if err != nil {
		return ev, err
	}
	if _, err := x.records.putJSON(ctx, path.Join(ev.Dir, evidenceFile), data); err != nil {
		return ev, err
	}
	if _, err := x.records.putBytes(ctx, path.Join(ev.Dir, summaryFile), []byte(ev.Summary())); err != nil {
		return ev, err
	}
	return ev, nil
}

// evidenceSaid is what a reply adds about the evidence: its verdict and
// where it lies, or why it could not be written.
func (x *restoreRun) evidenceSaid(ev *Evidence, werr error) string {
	if ev == nil {
		return ""
	}
	if werr != nil {
		return fmt.Sprintf(" Evidence: %s; it could not be written to the store (%v), so it is only in this reply and the act.", ev.Said, werr)
	}
	return fmt.Sprintf(" Evidence: %s; see %s.", ev.Said, x.records.abs(path.Join(ev.Dir, evidenceFile)))
}

// unprovenStart is the evidence of a restore a keeper that kept none began:
// what it checked before it removed anything is not known, so those checks
// fail, saying why.
func unprovenStart(j *journal) *Evidence {
	ev := newEvidence(j, j.Started)
	why := "not checked: the restore was begun by a keeper that kept no evidence of it, and a keeper that started again finished it"
	if j.Point != "" {
		ev.SetCheck(Check{Name: CheckPointVerified, Verdict: Fail, Said: "FAIL: " + why})
	}
	ev.SetCheck(Check{Name: CheckAsideVerified, Verdict: Fail, Said: "FAIL: " + why})
	return ev
}

// evidenceJSON is evidence.json as the keeper writes it: with the old keys
// only (kept.MarshalOldKeys), as the release before wrote it, since that
// release's DecodeEvidence refuses any key it does not know (show-evidence
// after a downgrade). This release reads either key.
func evidenceJSON(ev *Evidence) (json.RawMessage, error) {
	return kept.MarshalOldKeys(ev)
}
