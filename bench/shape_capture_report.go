package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// captureMarkdown writes the capture shape's figures that are not timed
// verbs (its verbs are in the table of methodsMarkdown).
func (res *Result) captureMarkdown(b *strings.Builder) {
	for _, s := range res.Shapes {
		if s.Capture != nil {
			s.Capture.markdown(b)
		}
	}
}

func (f *CaptureFigures) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "#### Capture against its targets (shape %s)\n\n", f.Shape)
	b.WriteString("| figure | value | target | met |\n|---|---|---|---|\n")
	if len(f.Lags) > 0 {
		p50, p99, most := quantile(f.Lags, 0.50), quantile(f.Lags, 0.99), slices.Max(f.Lags)
		fmt.Fprintf(b, "| the capture's lag (list-kept's, now − the window's end) while a writer wrote %.0f MB/s for %s, sampled every 500 ms: median / p99 / max of %d | %s / %s / %s | p99 ≤ %s | %s |\n",
			f.Rate/1e6, f.Paced.Round(time.Second), len(f.Lags), sec(p50), sec(p99), sec(most), captureLagTarget, yes(p99 <= captureLagTarget))
		fmt.Fprintf(b, "| what the paced writer wrote | %.1f MB/s | %.0f MB/s | %s |\n", f.Achieved/1e6, f.Rate/1e6, yes(f.Achieved >= 0.98*f.Rate))
	}
	if n := min(len(f.With), len(f.Without)); n > 0 {
		ratios := make([]float64, n)
		for i := range n {
			ratios[i] = f.With[i] / f.Without[i]
		}
		st := summarize(ratios)
		fmt.Fprintf(b, "| writers' throughput with capture ÷ without (unpaced runs of %s each, in pairs; median of the pairs' ratios): without %.0f MB/s, with %.0f MB/s (medians) | %.2f× (%.2f–%.2f) | ≥ %.2f× | %s |\n",
			mib(float64(f.RunBytes)), summarize(f.Without).med/1e6, summarize(f.With).med/1e6, st.med, st.lo, st.hi, writerCostTarget, yes(st.med >= writerCostTarget))
		if len(f.WithCPU) > 0 && len(f.WithoutCPU) > 0 {
			fmt.Fprintf(b, "| the CPU of a writers' run without / with capture (medians): the server's; the keeper's | %s / %s; %s / %s | — | — |\n",
				sec(medianCPU(f.WithoutCPU, false)), sec(medianCPU(f.WithCPU, false)), sec(medianCPU(f.WithoutCPU, true)), sec(medianCPU(f.WithCPU, true)))
		}
	}
	if f.Written > 0 {
		ratio := float64(f.StoreBytes) / float64(f.Written)
		fmt.Fprintf(b, "| the store: the newest chain's segments (archives and records) ÷ what the stream's stored bytes grew by since its base | %.3f× (%s ÷ %s) | ≤ %.1f× | %s |\n",
			ratio, mib(float64(f.StoreBytes)), mib(float64(f.Written)), segmentStoreTarget, yes(ratio <= segmentStoreTarget))
	}
	b.WriteString("\n")
}

// quantile is the q-quantile of ds (the nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// sec is d in seconds, to the millisecond.
func sec(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// medianCPU is the median CPU of runs, the keeper's or the server's.
func medianCPU(runs []WriterCPU, keeper bool) time.Duration {
	ds := make([]time.Duration, len(runs))
	for i, r := range runs {
		ds[i] = r.Server
		if keeper {
			ds[i] = r.Keeper
		}
	}
	return quantile(ds, 0.5)
}
