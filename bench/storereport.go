package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Targets of the store backends: each backend's time at most 1.3× the file
// backend's (encryption at rest, on the file backend: 1.15×), and the
// keeper's peak RSS at most 64 MiB on every backend.
const (
	targetStoreRatio = 1.3
	targetAgeRatio   = 1.15
)

// storeTarget is the ratio a backend's time may be of the file backend's.
func storeTarget(store string) float64 {
	if store == StoreAge {
		return targetAgeRatio
	}
	return targetStoreRatio
}

// storeLabel says what a backend is in the report.
func storeLabel(store string) string {
	switch store {
	case StoreNats:
		return "nats: object store, R1, on a second nats-server (the vault)"
	case StoreBus:
		return "bus: object store, R1, on the bus itself"
	case StoreS3:
		return "s3: versitygw over a directory"
	case StoreAge:
		return "age: a directory, encrypted at rest (--encrypt-to, --identity)"
	}
	return store
}

// storeMarkdown renders the store comparisons: against the targets, then
// the costs.
func (res *Result) storeMarkdown(b *strings.Builder) {
	if len(res.Stores) == 0 {
		return
	}
	b.WriteString("### Store backends against the targets (median, with min–max)\n\n")
	b.WriteString("Each backend's keeper (`nats-keeper serve --store …`, a process of its own) against the file backend's keeper " +
		"(the one above), on the same kept data, in pairs taken back to back: file, then the backend, for each backend in each round. " +
		"Peak RSS is the largest per-operation VmHWM of that keeper in these operations.\n\n")
	b.WriteString("| backend | comparison | file backend | this backend | ÷ file (median of pairs) | target | met |\n|---|---|---|---|---|---|---|\n")
	ops := []struct {
		name string
		of   func(StoreResult) StorePairs
	}{
		{"`snapshot-kept`", func(s StoreResult) StorePairs { return s.Snapshot }},
		{"`restore-kept` into an absent kept data", func(s StoreResult) StorePairs { return s.Restore }},
		{"`restore-kept` with the kept data live (aside + restore)", func(s StoreResult) StorePairs { return s.AsideRestore }},
	}
	var filePeak float64
	for _, s := range res.Stores {
		var files, stores []Sample
		for _, op := range ops {
			p := op.of(s)
			r := p.ratio()
			target := storeTarget(s.Store)
			fmt.Fprintf(b, "| %s | %s | %s | %s | %.2f× (%.2f–%.2f) | ≤ %.2f× | %s |\n", storeLabel(s.Store), op.name,
				secs(summarize(pick(p.File, wall))), secs(summarize(pick(p.Store, wall))), r.med, r.lo, r.hi, target, yes(r.med <= target))
			files, stores = append(files, p.File...), append(stores, p.Store...)
		}
		fp, sp := summarize(pick(files, rss)).hi, summarize(pick(stores, rss)).hi
		filePeak = max(filePeak, fp)
		fmt.Fprintf(b, "| %s | peak RSS of the keeper | %s | %s | — | ≤ 64 MiB | %s |\n", storeLabel(s.Store), mib(fp), mib(sp), yes(sp <= targetRSS))
	}
	big := slices.Concat(res.Snapshot.Keeper, res.Restore.Keeper, res.AsideRestore.Keeper)
	filePeak = max(filePeak, summarize(pick(big, rss)).hi)
	fmt.Fprintf(b, "| file (--dir) | peak RSS of the keeper (all its big operations) | %s | — | — | ≤ 64 MiB | %s |\n\n", mib(filePeak), yes(filePeak <= targetRSS))

	b.WriteString("### Store backends: costs (median; peak RSS is the largest)\n\n")
	b.WriteString("| operation | keeper | wall | MB/s | keeper CPU (of it kernel) | keeper peak RSS | bus server CPU (of it kernel) | store server CPU (of it kernel) |\n|---|---|---|---|---|---|---|---|\n")
	bigBytes := float64(res.Data.Bytes + res.Data.KVBytes)
	row := func(op, who string, ss []Sample, side bool) {
		w := summarize(pick(ss, wall)).med
		rate := "—"
		if w > 0 {
			rate = fmt.Sprintf("%.0f", bigBytes/w/1e6)
		}
		store := "—"
		if side {
			store = fmt.Sprintf("%.2f s (%.2f s)", summarize(pick(ss, storeCPU)).med, summarize(pick(ss, storeSys)).med)
		}
		fmt.Fprintf(b, "| %s | %s | %.3f s | %s | %.2f s (%.2f s) | %s | %.2f s (%.2f s) | %s |\n", op, who, w, rate,
			summarize(pick(ss, clientCPU)).med, summarize(pick(ss, clientSys)).med, mib(summarize(pick(ss, rss)).hi),
			summarize(pick(ss, serverCPU)).med, summarize(pick(ss, serverSys)).med, store)
	}
	for _, s := range res.Stores {
		for _, op := range ops {
			p := op.of(s)
			row(op.name, "file, paired with "+s.Store, p.File, false)
			row(op.name, storeLabel(s.Store), p.Store, s.Store != StoreBus && s.Store != StoreAge)
		}
	}
	b.WriteString("\nKeeper CPU is the CPU of that backend's `nats-keeper serve` process; bus server CPU is the kept data's nats-server's; " +
		"store server CPU is the store's own server's: the vault's nats-server, or versitygw (for the object store on the bus itself, " +
		"it is the bus server's, counted there).\n\n")
}

func storeCPU(s Sample) float64 { return s.StoreCPU.Seconds() }
func storeSys(s Sample) float64 { return s.StoreSys.Seconds() }
