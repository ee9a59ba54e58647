package keeper

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// checkLogical reads back every key the run wrote and checks that its live
// value is the point's (data and, for a KV key, its operation; for an
// object, its meta but for the nuid, and its chunks whole), into the
// evidence's logical-values check, one entry per stream.
func (x *logicalRun) checkLogical(ctx context.Context) {
	ev := x.j.Evidence
	if ev == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, x.evidenceWait)
	defer cancel()
	began := x.now()
	var fs []StreamFigures
	for _, ls := range x.lp.streams {
		f := StreamFigures{Stream: ls.name, Verdict: Pass}
		bad, firstBad := 0, ""
		for _, key := range ls.keys {
			live, err := lastOf(ctx, x.bus, ls.name, key.subject)
			same := false
			if err == nil {
				same, err = sameValue(ctx, x.bus, ls, sourceKeyOf(ls, key.want), live)
			}
			if err != nil || !same {
				bad++
				if firstBad == "" {
					firstBad = ls.keyName(key.subject)
				}
			}
		}
		what := "key(s)"
		if ls.object {
			what = "object(s)"
		}
		f.Note = fmt.Sprintf("%d of %d %s that differed hold the point's value now, each a new revision (revisions and times are new); %d %s were the same and left as they are",
			len(ls.keys)-bad, len(ls.keys), what, ls.total-len(ls.keys), what)
		if bad > 0 {
			f.Verdict = Fail
			f.Note += fmt.Sprintf("; %d do not, %s the first", bad, firstBad)
		}
		fs = append(fs, f)
	}
	ev.SetCheck(itemsCheck(CheckLogical, fs, "stream(s) whose every key written by the logical method holds the point's value"))
	ev.Timed("check values", began, x.now())
}

// sourceKeyOf is the source's value of a key as the comparison reads it.
func sourceKeyOf(ls *logicalStream, want *busarchive.ArchivedMessage) *sourceKey {
	if want == nil {
		return nil
	}
	sk := &sourceKey{seq: want.Seq, sum: sha256.Sum256(want.Data)}
	if ls.object {
		sk.meta, sk.gone = want, metaDeleted(want.Data)
	} else {
		sk.gone = kvGone(want.Header)
	}
	return sk
}
