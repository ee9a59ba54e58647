package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// printJSON prints v as indented JSON and a newline.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printSaid prints the reply's sentence and, when present, what was made.
func printSaid(w io.Writer, rep *kept.Reply) error {
	fmt.Fprintln(w, rep.Said)
	if rep.Dir != "" {
		fmt.Fprintf(w, "  dir:       %s\n", rep.Dir)
	}
	if p := rep.Point; p != nil {
		if p.Fingerprint == "" { // put back from an aside: it has no form or fingerprint
			fmt.Fprintf(w, "  from:      the set-aside copy %s of %s/%s, taken %s\n", p.Dir, p.Module, p.Local,
				p.Taken.UTC().Format("2006-01-02 15:04:05Z"))
		} else {
			fmt.Fprintf(w, "  point:     %s/%s form %d before %s, taken %s\n", p.Module, p.Local, p.Form, p.Fingerprint,
				p.Taken.UTC().Format("2006-01-02 15:04:05Z"))
		}
		switch {
		case p.At != nil && isCut(p): // a full point, each stream cut at one moment
			fmt.Fprintf(w, "  cut:       %s, each stream holding the messages its leader stamped at or before it\n", p.At.UTC().Format(time.RFC3339Nano))
		case p.At != nil: // incremental, or made by a restore to a moment
			fmt.Fprintf(w, "  moment:    %s, made from the base %s and its segments\n", momentText(*p.At), dash(p.Base))
		}
		if rep.Report == nil {
			printStreams(w, p.Streams)
		}
	}
	if a := rep.Aside; a != nil {
		fmt.Fprintf(w, "  aside:     %s (%s, %s) in %s\n", a.ID, a.Reason, humanBytes(a.ArchiveSize), a.Dir)
	}
	if len(rep.Positions) > 0 {
		done := "recorded" // a snapshot reads them; a restore sets them back
		if len(rep.Moves) > 0 || rep.Evidence != nil || rep.Plan != nil {
			done = "set back"
		}
		fmt.Fprintf(w, "  positions: %d consumer(s) %s (stream/consumer@acked up to):", len(rep.Positions), done)
		for _, p := range rep.Positions {
			fmt.Fprintf(w, " %s/%s@%d", p.Stream, p.Consumer, p.AckFloor)
		}
		fmt.Fprintln(w)
	}
	if rep.PositionsAgeMS != nil {
		fmt.Fprintf(w, "  sampled:   the consumer positions are those sampled %s before the moment\n", msText(*rep.PositionsAgeMS))
	}
	if pl := rep.Plan; pl != nil {
		fmt.Fprintln(w, "  plan (nothing was changed):")
		fmt.Fprintf(w, "    set aside:  %s (%s)\n", list(pl.SetAside), humanBytes(int64(pl.AsideBytes)))
		fmt.Fprintf(w, "    remove:     %s\n", list(pl.Remove))
		if !pl.AsideOnly {
			fmt.Fprintf(w, "    restore:    %s (%s) from %s\n", list(pl.Restore), humanBytes(int64(pl.RestoreBytes)), pl.Point)
			if pl.Overrides != nil {
				fmt.Fprintf(w, "    overrides:  %s\n", pl.Overrides)
			}
		}
		fmt.Fprintf(w, "    reposition: %d consumer(s)", len(pl.Reposition))
		for _, p := range pl.Reposition {
			fmt.Fprintf(w, " %s/%s@%d", p.Stream, p.Consumer, p.AckFloor)
		}
		fmt.Fprintln(w)
	}
	if rep.CatchUp != "" {
		fmt.Fprintf(w, "  catch-up:  run %s next\n", rep.CatchUp)
	}
	if r := rep.Report; r != nil {
		fmt.Fprintf(w, "  report:    %s verifies (%s)\n", r.Point, humanBytes(r.Bytes))
		printStreams(w, r.Streams)
	}
	return nil
}

func printStreams(w io.Writer, ss []kept.StreamSum) {
	for _, s := range ss {
		fmt.Fprintf(w, "    stream %s: %d message(s), sequences %d..%d, %d consumer(s)\n", s.Name, s.Messages, s.FirstSeq, s.LastSeq, s.Consumers)
	}
}

func list(ss []string) string {
	if len(ss) == 0 {
		return "nothing"
	}
	return strings.Join(ss, ", ")
}

// sealedMark marks the size of an archive encrypted at rest.
func sealedMark(s kept.Sealing) string {
	if s.Encrypted != nil {
		return ", encrypted"
	}
	return ""
}

// printList prints list-kept's points, asides, schedules, captures and
// totals as tables.
func printList(w io.Writer, rep *kept.Reply) error {
	fmt.Fprintln(w, rep.Said)
	now := time.Now()
	if len(rep.Points) > 0 {
		fmt.Fprintln(w, "\nRestore points:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  MODULE\tLOCAL\tFORM\tBEFORE\tTAKEN\tAGE\tSIZE\tCATCH-UP\tBY")
		for _, p := range rep.Points {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Module, p.Local, p.Form, p.Fingerprint,
				p.Taken.UTC().Format("2006-01-02 15:04:05Z"), keeper.HumanAge(now.Sub(p.Taken)), humanBytes(p.ArchiveSize)+sealedMark(p.Sealing), dash(p.CatchUp), dash(p.Caller))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Asides) > 0 {
		fmt.Fprintln(w, "\nSet-aside data (remove only with discard-aside; WAITING: older than the keeper's --aside-warn-after):")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tREASON\tTAKEN\tAGE\tSIZE\tASKED BY\tWHY\t")
		for _, a := range rep.Asides {
			flag := ""
			if slices.Contains(rep.Waiting, a.ID) {
				flag = "WAITING"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Reason, a.Taken.UTC().Format("2006-01-02 15:04:05Z"),
				keeper.HumanAge(now.Sub(a.Taken)), humanBytes(a.ArchiveSize)+sealedMark(a.Sealing), dash(a.Caller), dash(a.Why), flag)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := printSchedules(w, rep.Schedules); err != nil {
		return err
	}
	if err := printCaptures(w, rep.Captures); err != nil {
		return err
	}
	if len(rep.Totals) > 0 {
		fmt.Fprintln(w, "\nKept, per kept data:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  MODULE\tLOCAL\tPOINTS\tPOINT BYTES\tASIDES\tASIDE BYTES")
		for _, t := range rep.Totals {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%d\t%s\n", t.Module, t.Local, t.Points, humanBytes(t.PointBytes), t.Asides, humanBytes(t.AsideBytes))
		}
		fmt.Fprintf(tw, "  all\t\t\t\t\t%s\n", humanBytes(rep.TotalBytes))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printCaptures prints list-kept's captures: per kept data whether it is
// captured, the window a restore to a moment can reach, the lag of its
// newest segment, and what the store holds of it.
func printCaptures(w io.Writer, caps []kept.CaptureInfo) error {
	if len(caps) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nCaptured (restore-kept --at a moment of the WINDOW; LAG: how far its end is behind now):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  MODULE\tLOCAL\tCAPTURE\tWINDOW\tLAG\tBYTES\tSEGMENTS\tBASES")
	for _, c := range caps {
		window, lag := "nothing captured yet", "-"
		if c.From != nil && c.To != nil {
			window = momentText(*c.From) + ".." + momentText(*c.To)
			if c.On {
				lag = msText(c.LagMS)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", c.Module, c.Local, onOff(c.On), window, lag, humanBytes(c.Bytes), c.Segments, c.Bases)
	}
	return tw.Flush()
}

// printSchedules prints list-kept's schedules: each kept data's every, the
// form and fingerprint of the point due next, and when.
func printSchedules(w io.Writer, scheds []kept.Scheduled) error {
	if len(scheds) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nScheduled points (taken by the keepers of the bus; LAST DUE: taken, or not yet):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  MODULE\tLOCAL\tEVERY\tFORM\tLAST DUE\tNEXT DUE\tNEXT BEFORE\tPOLICY")
	for _, s := range scheds {
		every := s.Every
		if s.TimeZone != "" {
			every += " (" + s.TimeZone + ")"
		}
		last := "-"
		if !s.Due.IsZero() {
			last = s.Due.UTC().Format("2006-01-02 15:04Z") + map[bool]string{true: " taken", false: " not yet"}[s.Taken]
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.Module, s.Local, every, s.Form, last,
			s.NextDue.UTC().Format("2006-01-02 15:04Z"), kept.ScheduledFingerprint(s.NextDue), s.Policy)
	}
	return tw.Flush()
}

// isCut reports whether a point with At is a full point taken at a cut:
// neither incremental nor made by a restore to a moment (f<form>-at-…).
func isCut(p *kept.Point) bool {
	return !p.Incremental && !strings.HasPrefix(p.Fingerprint, "at-")
}
