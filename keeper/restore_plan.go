package keeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// restorePlan is a RestorePlan with what executing it needs.
type restorePlan struct {
	RestorePlan
	point    *Point
	pointRel string
	manifest *busarchive.Manifest
	live     []StreamInfo // what will be set aside and removed
}

// planRestore works out exactly what a restore-kept would do, touching
// nothing. The point's archive is opened (its manifest's seal and its layout
// checked) and, when any of the kept data is live or for a dry run, verified
// whole here, before the bus is touched: a point that fails verification
// sets nothing aside and removes nothing.
//
// When none of the kept data is live, nothing is at risk, and the whole
// verification is not made twice: the restore verifies each stream's data
// while it reads it for the server, and withholds its end until it verified
// (restoreArchive). A point that fails then leaves nothing behind: the
// restore removes what it began. That saves a whole read of the point, and
// the bytes sent are the very bytes verified.
func (k *Keeper) planRestore(ctx context.Context, r Request) (*restorePlan, error) {
	pl := &restorePlan{RestorePlan: RestorePlan{AsideOnly: r.AsideOnly,
		SetAside: []string{}, Remove: []string{}, Restore: []string{}, Reposition: []Position{}}}
	live, looked, err := k.liveStreams(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	if !r.AsideOnly {
		p, rel, err := k.locatePoint(r)
		if err != nil {
			return nil, err
		}
		a, c, err := openArchive(k.abs(rel))
		if err != nil {
			return nil, fmt.Errorf("restore point %s is damaged: %w", pointName(p), err)
		}
		m := a.Manifest()
		c.Close()
		if got, want := manifestNames(m), streamSumNames(p.Streams); strings.Join(got, ",") != strings.Join(want, ",") {
			return nil, errorf(ErrDamaged, "restore point %s: point.json names streams %v but its archive holds %v", pointName(p), want, got)
		}
		pl.point, pl.pointRel, pl.manifest = p, rel, m
		pl.Point = k.abs(rel)
		pl.Restore = manifestNames(m)
		pl.RestoreBytes = uint64(m.Bytes())
		// A stream the point carries that lives on the bus outside the kept
		// data's current streams would block its restore: it is set aside too.
		for _, s := range pl.Restore {
			if containsStream(live, s) {
				continue
			}
			si, err := k.bus.Stream(ctx, s)
			switch {
			case errors.Is(err, ErrNoStream):
			case err != nil:
				return nil, errorf(ErrFailed, "looking up stream %s: %v", s, err)
			default:
				live = append(live, *si)
			}
		}
		// The module's consumers on streams the point does not carry are set
		// back to their recorded positions; the point's own streams carry
		// their consumers.
		for _, pos := range p.Positions {
			if contains(pl.Restore, pos.Stream) {
				continue
			}
			_, err := k.bus.Stream(ctx, pos.Stream)
			switch {
			case errors.Is(err, ErrNoStream):
				pl.Unplaced = append(pl.Unplaced, pos)
			case err != nil:
				return nil, errorf(ErrFailed, "looking up stream %s: %v", pos.Stream, err)
			default:
				pl.Reposition = append(pl.Reposition, pos)
			}
		}
	} else if len(live) == 0 {
		return nil, errorf(ErrNotFound, "no kept data %s/%s on the bus to set aside (looked for %s)", r.Module, r.Local, strings.Join(looked, ", "))
	}
	if !r.AsideOnly && (len(live) > 0 || r.DryRun) {
		progressFrom(ctx)(Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "verify"})
		began := time.Now()
		_, rep, err := verifyArchive(ctx, pl.Point)
		if err != nil {
			return nil, fmt.Errorf("restore point %s is damaged: %w", pointName(pl.point), err)
		}
		k.log.Debug("restore point verified", "module", r.Module, "local", r.Local, "point", pointName(pl.point), "bytes", rep.Bytes, "took", time.Since(began))
	}
	pl.live = live
	for _, s := range live {
		pl.SetAside = append(pl.SetAside, s.Name)
		pl.Remove = append(pl.Remove, s.Name)
		pl.AsideBytes += s.Bytes
	}
	return pl, nil
}

func (pl *restorePlan) said(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run, nothing was changed. restore-kept of %s/%s would ", r.Module, r.Local)
	if len(pl.SetAside) > 0 {
		fmt.Fprintf(&b, "set aside %s (%s) and then remove it", strings.Join(pl.SetAside, ", "), HumanBytes(int64(pl.AsideBytes)))
	} else {
		b.WriteString("set nothing aside (none of the kept data is live)")
	}
	if pl.AsideOnly {
		b.WriteString(", and restore nothing.")
		return b.String()
	}
	fmt.Fprintf(&b, ", restore %s (%s) from %s", strings.Join(pl.Restore, ", "), HumanBytes(int64(pl.RestoreBytes)), pl.Point)
	fmt.Fprintf(&b, ", and set back %d consumer position(s)", len(pl.Reposition))
	for i, p := range pl.Reposition {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s on %s after sequence %d", p.Consumer, p.Stream, p.AckFloor)
	}
	b.WriteString(".")
	b.WriteString(pl.unplacedSaid())
	return b.String()
}

// unplacedSaid names the recorded positions that cannot be set back because
// their stream is gone.
func (pl *restorePlan) unplacedSaid() string {
	if len(pl.Unplaced) == 0 {
		return ""
	}
	var names []string
	for _, p := range pl.Unplaced {
		names = append(names, p.Consumer+" on "+p.Stream)
	}
	return fmt.Sprintf(" %d recorded position(s) cannot be set back because their stream no longer exists: %s.",
		len(pl.Unplaced), strings.Join(names, ", "))
}

func manifestNames(m *busarchive.Manifest) []string {
	out := make([]string, 0, len(m.Streams))
	for _, s := range m.Streams {
		out = append(out, s.Name)
	}
	return out
}

func streamSumNames(ss []StreamSum) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func containsStream(ss []StreamInfo, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}
