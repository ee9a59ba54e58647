package bench

import (
	"fmt"
	"strings"
	"time"
)

// restoreByServer names the server's own restore in the random shape's
// checks.
const restoreByServer = "the server's own restore"

// ratioTo is the median over the rounds of a[i] ÷ b[i], by wall time.
func ratioTo(a, b []Sample) stats {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i].Wall > 0 {
			r = append(r, a[i].Wall.Seconds()/b[i].Wall.Seconds())
		}
	}
	return summarize(r)
}

func times(ss []Sample) string {
	if len(ss) == 0 {
		return "—"
	}
	return secs(summarize(pick(ss, wall)))
}

func ratioText(s stats, n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.med, s.lo, s.hi)
}

// shapesOnlyMarkdown is the report of a run without the random shape: the
// machine and the shapes.
func (res *Result) shapesOnlyMarkdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Latest run\n\n")
	fmt.Fprintf(&b, "Taken %s (%s in all) with `%s`.\n\n", res.Started.Format(time.RFC3339), res.Took.Round(time.Second), res.Config.Command)
	res.machineLines(&b)
	b.WriteString("\n")
	res.shapesMarkdown(&b)
	return b.String()
}

// shapesMarkdown writes the section of the data shapes: every comparison
// against the nats CLI with the server's own restore where it was measured,
// then the points tiers, then each shape's data and costs.
func (res *Result) shapesMarkdown(b *strings.Builder) {
	if len(res.Shapes) == 0 && len(res.ServerRestore) == 0 {
		return
	}
	c := res.Config
	b.WriteString("### Data shapes against the nats CLI (median, with min–max)\n\n")
	fmt.Fprintf(b, "Each shape other than random runs on a nats-server and a keeper (file backend) of its own, in %d rounds: keeper, then nats CLI, "+
		"then, for a restore, the server's own restore (the JetStream restore protocol fed from memory with the nats CLI's backup of the same streams, "+
		"%d-byte chunks, %d awaiting their acknowledgement at once: no client-side work at all, so the server's limit). "+
		"A snapshot whose first pair took under %s in all is taken in %d pairs instead (the row says so). "+
		"Every restore is checked against the data as it was (see each shape). Ratios are medians of the per-round ratios.\n\n", c.Rounds, rawChunk, rawWindow, c.QuickPair, c.SmallRounds)
	b.WriteString("| shape | operation | keeper | nats CLI | keeper ÷ nats | target | met | server's own restore | keeper ÷ server | nats ÷ server |\n|---|---|---|---|---|---|---|---|---|---|\n")
	if len(res.ServerRestore) > 0 {
		kr, nr := ratioTo(res.Restore.Keeper, res.ServerRestore), ratioTo(res.Restore.Nats, res.ServerRestore)
		rr := res.Restore.ratio()
		fmt.Fprintf(b, "| random | `restore-kept` into an absent kept data (the rows above) | %s | %s | %s | — | — | %s | %s | %s |\n",
			times(res.Restore.Keeper), times(res.Restore.Nats), ratioText(rr, len(res.Restore.Nats)), times(res.ServerRestore),
			ratioText(kr, len(res.ServerRestore)), ratioText(nr, len(res.ServerRestore)))
	}
	for _, s := range res.Shapes {
		for _, row := range s.Rows {
			if row.Versus != "" || row.TargetWall > 0 {
				continue // in the table of methodsMarkdown
			}
			cli, ratio, target, met := "—", "—", "—", "—"
			if len(row.Pairs.Nats) > 0 {
				cli, ratio = times(row.Pairs.Nats), ratioText(row.Pairs.ratio(), len(row.Pairs.Nats))
			}
			if row.Target > 0 && len(row.Pairs.Nats) > 0 {
				target, met = fmt.Sprintf("≤ %.2f×", row.Target), yes(row.Pairs.ratio().med <= row.Target)
			}
			server, ks, ns := "—", "—", "—"
			if len(row.Server) > 0 {
				server = times(row.Server)
				ks, ns = ratioText(ratioTo(row.Pairs.Keeper, row.Server), len(row.Server)), ratioText(ratioTo(row.Pairs.Nats, row.Server), len(row.Server))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Shape, row.Op, times(row.Pairs.Keeper), cli, ratio, target, met, server, ks, ns)
		}
		for _, t := range s.Points {
			fmt.Fprintf(b, "| %s | `snapshot-kept` of one kept data, %d kept data on the bus (%d pairs) | %s | %s | %s | — | — | — | — | — |\n",
				s.Shape, t.Points, len(t.Pairs.Nats), times(t.Pairs.Keeper), times(t.Pairs.Nats), ratioText(t.Pairs.ratio(), len(t.Pairs.Nats)))
		}
	}
	b.WriteString("\n")
	res.methodsMarkdown(b)
	res.pointsMarkdown(b)
	res.busyMarkdown(b)
	res.captureMarkdown(b)
	for _, s := range res.Shapes {
		fmt.Fprintf(b, "**%s** (%s, load average as it began: %s).", s.Shape, s.Took.Round(time.Second), s.Load)
		if s.Data != "" {
			fmt.Fprintf(b, " %s.", s.Data)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(b, " %s%s.", strings.ToUpper(n[:1]), n[1:])
		}
		if s.Failed != "" {
			// The logs are on keeper-bench's standard error.
			why, _, _ := strings.Cut(s.Failed, "; the keeper's log:")
			why, _, _ = strings.Cut(why, "; the server's log:")
			fmt.Fprintf(b, "\n\n**It stopped part-way**, so some of its rows are missing: %s", oneLine(why))
		}
		b.WriteString("\n\n")
		against := 0
		for _, row := range s.Rows {
			switch {
			case row.CLI != "":
				fmt.Fprintf(b, "- %s against %s\n", row.Op, row.CLI)
			case row.Versus != "":
				fmt.Fprintf(b, "- %s against %s\n", row.Op, row.Versus)
			default:
				continue
			}
			against++
		}
		if against > 0 {
			b.WriteString("\n")
		}
	}
	res.shapeCosts(b)
}

// pointsMarkdown writes the table of the points shape's tiers.
func (res *Result) pointsMarkdown(b *strings.Builder) {
	var tiers []PointsTier
	for _, s := range res.Shapes {
		tiers = append(tiers, s.Points...)
	}
	if len(tiers) == 0 {
		return
	}
	b.WriteString("#### Many points (median, with min–max)\n\n")
	b.WriteString("| points (= kept data) | `snapshot-kept` of one kept data (all taken to reach the tier) | `list-kept {\"module\":\"pts\"}` | its reply | `list-kept {}` | its reply | keeper RSS (peak) | start-up (rebuild + recovery scan, to the first answer) | RSS after start-up |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range tiers {
		fmt.Fprintf(b, "| %d | %s over %d | %s | %s | %s | %s | %s (%s) | %s | %s |\n", t.Points, times(t.Snapshot), len(t.Snapshot),
			times(t.ListModule), replyBytes(t.ModuleBytes, len(t.ListModule)), times(t.ListAll), replyBytes(t.AllBytes, len(t.ListAll)),
			mib(float64(t.RSS)), mib(float64(t.PeakRSS)), times(t.Startup), mib(float64(t.StartupRSS)))
		if t.ListErr != "" {
			fmt.Fprintf(b, "| %d | a list-kept failed: %s | | | | | | | |\n", t.Points, oneLine(t.ListErr))
		}
	}
	b.WriteString("\n")
}

func replyBytes(n, samples int) string {
	if samples == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// oneLine is s on one line of a table, cut to a readable length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// shapeCosts writes the costs of every shape's operations.
func (res *Result) shapeCosts(b *strings.Builder) {
	b.WriteString("#### Data shapes: costs (median; peak RSS is the largest)\n\n")
	b.WriteString("| operation | wall | MB/s | client CPU (of it kernel) | client peak RSS | server CPU (of it kernel) | server cores busy |\n|---|---|---|---|---|---|---|\n")
	if len(res.ServerRestore) > 0 {
		costRow(b, "random: the server's own restore", res.ServerRestore, float64(res.Data.Bytes+res.Data.KVBytes))
	}
	for _, s := range res.Shapes {
		for _, row := range s.Rows {
			costRow(b, s.Shape+": keeper "+row.Op, row.Pairs.Keeper, s.Bytes)
			switch {
			case len(row.Pairs.Nats) > 0 && row.Versus != "":
				costRow(b, s.Shape+": keeper "+row.Versus, row.Pairs.Nats, s.Bytes)
			case len(row.Pairs.Nats) > 0:
				costRow(b, s.Shape+": nats CLI", row.Pairs.Nats, s.Bytes)
			}
			if len(row.Server) > 0 {
				costRow(b, s.Shape+": the server's own restore", row.Server, s.Bytes)
			}
		}
	}
	b.WriteString("\nThe server's own restore has no client process: its client CPU is 0.\n\n")
}

// methodsMarkdown writes the rows of issue 40 that are not against the nats
// CLI: a rollback against the keeper's own with another method, and a verb
// with no other side, against its target.
func (res *Result) methodsMarkdown(b *strings.Builder) {
	var lines []string
	for _, s := range res.Shapes {
		for _, row := range s.Rows {
			switch {
			case row.TargetWall > 0:
				took := tookText(row.Took)
				target, met := fmt.Sprintf("≤ %g s, reported against the target", row.TargetWall.Seconds()), "—"
				if len(row.Pairs.Keeper) > 0 {
					met = yes(summarize(pick(row.Pairs.Keeper, wall)).med <= row.TargetWall.Seconds())
				}
				lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | — | — | %s | %s |", s.Shape, row.Op, times(row.Pairs.Keeper), took, target, met))
			case row.Versus != "":
				ratio, met := ratioText(row.Pairs.ratio(), len(row.Pairs.Nats)), "—"
				if len(row.Pairs.Nats) > 0 {
					met = yes(row.Pairs.ratio().med <= row.Target)
				}
				lines = append(lines, fmt.Sprintf("| %s | %s | %s | — | %s: %s | %s | ≤ %.2f× | %s |", s.Shape, row.Op, times(row.Pairs.Keeper), row.Versus,
					times(row.Pairs.Nats), ratio, row.Target, met))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("#### Restore methods and diff against the keeper's own or a target (median, with min–max)\n\n")
	b.WriteString("The keeper's side is timed from request to reply; \"took\" is what the reply says the verb took. A rollback against the keeper's own is taken in the same rounds, each after the same change.\n\n")
	b.WriteString("| shape | operation | keeper | took | against | keeper ÷ it | target | met |\n|---|---|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n\n")
}

// tookText is the median and spread of what the replies said a verb
// took; said so when the reply gives it to the second only.
func tookText(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	st := summarize(pickDurations(ds))
	for _, d := range ds {
		if d%time.Second != 0 {
			return secs(st)
		}
	}
	return fmt.Sprintf("%.0f s (%.0f–%.0f), to the second", st.med, st.lo, st.hi)
}

// pickDurations is ds in seconds.
func pickDurations(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}
