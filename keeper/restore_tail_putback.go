package keeper

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// Putting back an aside that holds a delta's tail (restore-kept from
// aside/<id>, StreamSum.Base set): the tail alone is not the stream, so
// the stream is restored whole from its base point's messages followed by
// the tail's, composed into one archive as it is sent (composeTail), each
// message with its own sequence, time, subject, headers and data — the
// stream exactly as it was when the delta set its tail aside. It is a full
// restore of that stream: the live stream is set aside whole first, as
// any. The base point must still be the one the tail follows (its last
// sequence the tail's TailAfter) and verify whole before anything is
// removed; a base point an aside depends on is not pruned or discarded.
// The module's consumers on such a stream are made again from the aside's
// record once it is restored (planPositions), as the tail carries none.

// checkTails checks, before anything changes, that each tail the plan's
// source holds can be put back exactly: its base point is there, is the
// point the tail follows, and verifies whole.
func (k *Keeper) checkTails(ctx context.Context, pl *restorePlan) error {
	for _, st := range pl.point.Streams {
		if st.Base == "" {
			continue
		}
		base, err := k.loadSource(ctx, st.Base)
		if err != nil {
			return Errorf(ErrConflict, "%s holds only the tail of stream %s after sequence %s of point %s, and that point cannot be read (%v), so the stream cannot be put back exactly",
				pl.Point, st.Name, count(st.TailAfter), st.Base, err)
		}
		a, err := k.openArchive(ctx, st.Base, base)
		if err != nil {
			return fmt.Errorf("point %s, which the tail of stream %s follows, is damaged: %w", st.Base, st.Name, err)
		}
		_, _, err = k.verifyArchive(ctx, a)
		sm := a.Manifest().Stream(st.Name)
		a.Close()
		if err != nil {
			return fmt.Errorf("point %s, which the tail of stream %s follows, is damaged: %w", st.Base, st.Name, err)
		}
		if sm == nil || sm.State.LastSeq != st.TailAfter || st.FirstSeq != st.TailAfter+1 {
			return Errorf(ErrConflict, "%s holds the tail of stream %s after sequence %s of point %s, but that point no longer ends there (it was taken again since), so the stream cannot be put back exactly",
				pl.Point, st.Name, count(st.TailAfter), st.Base)
		}
	}
	return nil
}

// openBases opens, for each stream of the run's source that holds a tail,
// the archive of its base point; close them with closeBases.
func (x *restoreRun) openBases(ctx context.Context) (map[string]*openedArchive, error) {
	bases := map[string]*openedArchive{}
	if x.point == nil {
		return bases, nil
	}
	for _, st := range x.point.Streams {
		if st.Base == "" || !contains(x.j.Restore, st.Name) {
			continue
		}
		rec, err := x.records.readHead(ctx, st.Base)
		if err == nil {
			var a *openedArchive
			if a, err = x.records.openArchive(ctx, st.Base, rec); err == nil {
				bases[st.Name] = a
				if bm, tm := a.Manifest().Stream(st.Name), x.arch.Manifest().Stream(st.Name); bm != nil && tm != nil {
					if x.composed == nil {
						x.composed = map[string]busarchive.ArchiveHead{}
					}
					x.composed[st.Name] = composedState(bm, tm)
				}
				continue
			}
		}
		closeBases(bases)
		return nil, fmt.Errorf("point %s, which the tail of stream %s follows, cannot be read: %w", st.Base, st.Name, err)
	}
	return bases, nil
}

func closeBases(bases map[string]*openedArchive) {
	for _, a := range bases {
		a.Close()
	}
}

// composedState is the state of stream s put back whole from its base
// point's manifest and its tail's.
func composedState(base, tail *busarchive.StreamManifest) busarchive.ArchiveHead {
	b, t := base.State, tail.State
	h := busarchive.ArchiveHead{FirstSeq: b.FirstSeq, LastSeq: t.LastSeq, Msgs: b.Msgs + t.Msgs, Bytes: b.Bytes + t.Bytes}
	if b.Msgs == 0 {
		h.FirstSeq = t.FirstSeq
	}
	return h
}

// composeTail is stream s's archive and backup.json put back whole: the
// base point's messages, then the tail's, each archive checked against its
// manifest as it is read (a damaged one fails the read). The
// configuration is the tail's (the live one when it was set aside).
func composeTail(ctx context.Context, base, tail *openedArchive, s string) (io.ReadCloser, io.ReadCloser, error) {
	bm, tm := base.Manifest().Stream(s), tail.Manifest().Stream(s)
	if bm == nil || tm == nil {
		return nil, nil, fmt.Errorf("stream %s is not in both its base point and its tail", s)
	}
	head := composedState(bm, tm)
	meta, err := tail.StreamMeta(s)
	if err != nil {
		return nil, nil, err
	}
	doc, err := io.ReadAll(io.LimitReader(meta, busarchive.MaxMetaSize))
	meta.Close()
	if err != nil {
		return nil, nil, err
	}
	cfg, subjects, err := configOf(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("the tail of stream %s: %w", s, err)
	}
	whole, err := tailMeta(cfg, head, 0, 0, subjects)
	if err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeComposed(ctx, pw, head, base, tail, s))
	}()
	return pr, io.NopCloser(bytes.NewReader(whole)), nil
}

// writeComposed writes the composed archive of stream s into w.
func writeComposed(ctx context.Context, w io.Writer, head busarchive.ArchiveHead, base, tail *openedArchive, s string) error {
	aw, err := busarchive.NewStreamArchiveWriter(w, head)
	if err != nil {
		return err
	}
	for _, a := range []*openedArchive{base, tail} {
		r, err := a.CheckedStreamData(ctx, s)
		if err != nil {
			return err
		}
		_, err = busarchive.ReadStreamArchive(r, nil, aw.Message)
		if err == nil {
			_, err = io.Copy(io.Discard, r) // to its end, so its checksum is checked
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("reading stream %s from %s: %w", s, a.Where, err)
		}
	}
	return aw.Close()
}

// configOf is the configuration a backup.json holds, and its subjects.
func configOf(doc []byte) (json.RawMessage, uint64, error) {
	var m struct {
		Config json.RawMessage `json:"config"`
		State  struct {
			Subjects uint64 `json:"num_subjects"`
		} `json:"state"`
	}
	if err := json.Unmarshal(doc, &m); err != nil || len(m.Config) == 0 {
		return nil, 0, fmt.Errorf("its backup.json holds no configuration (%v)", err)
	}
	return m.Config, m.State.Subjects, nil
}
