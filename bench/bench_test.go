package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShortRun runs the whole benchmark with a few MiB to prove that it
// works: real processes, every comparison, and the report. It asserts no
// time, only that each comparison was measured and reported.
func TestShortRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	res, err := Run(context.Background(), Config{Size: 2 << 20, KVKeys: 100, SmallKVKeys: 50, Rounds: 2, SmallRounds: 2,
		Work: t.TempDir(), Command: "go test ./bench -run TestShortRun", Shapes: []string{ShapeRandom}})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Pairs{"snapshot": res.Snapshot, "restore": res.Restore, "small KV": res.SmallKV} {
		if len(p.Keeper) != 2 || len(p.Nats) != 2 {
			t.Errorf("%s: %d keeper and %d nats samples, want 2 and 2", name, len(p.Keeper), len(p.Nats))
		}
		for _, s := range append(p.Keeper, p.Nats...) {
			if s.Wall <= 0 || s.PeakRSS <= 0 {
				t.Errorf("%s: a sample without wall time or peak RSS: %+v", name, s)
			}
		}
	}
	// The keeper logs a verification of the whole point before the bus is
	// touched only when live data is to be set aside; into absent kept data
	// it verifies while it restores.
	for _, s := range res.Restore.Keeper {
		if s.Verify != 0 {
			t.Errorf("restore into absent data: the point was verified whole first (%v, from the keeper's log)", s.Verify)
		}
	}
	for _, s := range res.AsideRestore.Keeper {
		if s.Verify <= 0 || s.Verify >= s.Wall {
			t.Errorf("aside + restore: verification time %v not within the wall time %v (read from the keeper's log)", s.Verify, s.Wall)
		}
	}
	if len(res.AsideRestore.Keeper) != 2 || len(res.AsideRestore.Nats) != 0 {
		t.Errorf("aside + restore: %d keeper and %d nats samples, want 2 and 0", len(res.AsideRestore.Keeper), len(res.AsideRestore.Nats))
	}
	checkStoreRuns(t, res, []string{StoreNats, StoreS3, StoreAge})
	// Server CPU is read in clock ticks of 10 ms (see checkStoreRuns), so
	// it is asked of the two restores together.
	if len(res.ServerRestore) != 2 || res.ServerRestore[0].Wall <= 0 || res.ServerRestore[1].Wall <= 0 ||
		res.ServerRestore[0].ServerCPU+res.ServerRestore[1].ServerCPU <= 0 {
		t.Errorf("the server's own restore: %+v, want 2 samples with wall and server CPU", res.ServerRestore)
	}
	if res.Data.Messages != 2048 || res.ArchiveSize <= 0 {
		t.Errorf("data: %d messages and a %d-byte archive, want 2048 and some", res.Data.Messages, res.ArchiveSize)
	}

	// A new report, then one written between the markers of a file with
	// hand-written text around them, which stays.
	if err := WriteReport(out, res); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{BeginMarker, EndMarker, "| comparison | keeper | nats CLI |", "`snapshot-kept` vs `nats backup stream`",
		"`restore-kept` into an absent kept data", "verifying the point whole before anything is set aside", "set aside + restore", "peak RSS", "small KV", "### Exact commands",
		"2 cores", "nats CLI v0.5.0", "go test ./bench -run TestShortRun",
		"### Store backends against the targets", "on a second nats-server (the vault)", "s3: versitygw over a directory", "≤ 1.30×",
		"age: a directory, encrypted at rest (--encrypt-to, --identity)", "≤ 1.15×", "--encrypt-to RECIPIENT --identity DIR/age.key",
		"--store nats://127.0.0.1:VAULTPORT/keeper_points", "--store s3://keeper-points/bench", "### Store backends: costs",
		"| random | `restore-kept` into an absent kept data (the rows above) |", "random: the server's own restore"} {
		if want == "2 cores" {
			want = res.Machine.CPU
		}
		if !strings.Contains(string(first), want) {
			t.Errorf("the report lacks %q:\n%s", want, first)
		}
	}
	hand := "# Benchmarks\n\nHand-written intro.\n\n" + BeginMarker + "\nold figures\n" + EndMarker + "\n\n## Levers\n\nHand-written levers.\n"
	if err := os.WriteFile(out, []byte(hand), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(out, res); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(second)
	if !strings.HasPrefix(s, "# Benchmarks\n\nHand-written intro.\n\n"+BeginMarker) || !strings.HasSuffix(s, EndMarker+"\n\n## Levers\n\nHand-written levers.\n") ||
		strings.Contains(s, "old figures") || !strings.Contains(s, "| comparison | keeper | nats CLI |") {
		t.Errorf("the report between markers was not replaced in place:\n%s", s)
	}

	// A file without the markers is not overwritten.
	plain := filepath.Join(t.TempDir(), "other.md")
	if err := os.WriteFile(plain, []byte("someone's notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(plain, res); err == nil {
		t.Error("WriteReport overwrote a file without the markers")
	}
	if b, _ := os.ReadFile(plain); string(b) != "someone's notes\n" {
		t.Errorf("the file without markers changed: %q", b)
	}
}

// checkStoreRuns checks that each backend was measured in pairs with the file
// backend, with the store server's CPU where it has one of its own.
func checkStoreRuns(t *testing.T, res *Result, want []string) {
	t.Helper()
	if len(res.Stores) != len(want) {
		t.Fatalf("%d store comparisons, want %v", len(res.Stores), want)
	}
	for i, s := range res.Stores {
		if s.Store != want[i] || !strings.Contains(s.Command, "--store ") {
			t.Errorf("store comparison %d: %q with command %q, want %s", i, s.Store, s.Command, want[i])
		}
		// The keeper's CPU comes from /proc/<pid>/stat in clock ticks of
		// 10 ms, so one operation on a few MiB may read 0 (a 65 ms restore
		// did, in CI). Each sample must read no less than 0, and the
		// backend's keeper must have been seen working over all of its
		// operations together.
		var storeCPU time.Duration
		for name, p := range map[string]StorePairs{"snapshot": s.Snapshot, "restore": s.Restore, "aside + restore": s.AsideRestore} {
			if len(p.File) != 2 || len(p.Store) != 2 {
				t.Errorf("%s %s: %d file and %d store samples, want 2 and 2", s.Store, name, len(p.File), len(p.Store))
			}
			for _, x := range append(p.File, p.Store...) {
				if x.Wall <= 0 || x.PeakRSS <= 0 || x.ClientCPU < 0 {
					t.Errorf("%s %s: a sample without wall time or peak RSS, or with negative keeper CPU: %+v", s.Store, name, x)
				}
			}
			for _, x := range p.Store {
				storeCPU += x.ClientCPU
			}
		}
		if storeCPU <= 0 {
			t.Errorf("%s: its keeper's CPU read 0 over all six of its operations, so the CPU of that process was not measured", s.Store)
		}
		for _, x := range s.AsideRestore.Store {
			if x.Verify <= 0 || x.Verify >= x.Wall {
				t.Errorf("%s aside + restore: verification time %v not within the wall time %v", s.Store, x.Verify, x.Wall)
			}
		}
	}
}

func TestParseStores(t *testing.T) {
	if got, err := ParseStores(" file, nats,s3,bus "); err != nil || strings.Join(got, ",") != "file,nats,s3,bus" {
		t.Errorf("ParseStores = %q, %v", got, err)
	}
	for _, in := range []string{"", "nats,s3", "file,ftp", "file,file"} {
		if got, err := ParseStores(in); err == nil {
			t.Errorf("ParseStores(%q) = %q, want an error", in, got)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "512MiB": 512 << 20, "4MB": 4e6, "1000": 1000, "2g": 2 << 30, "1.5KiB": 1536, "3 MiB": 3 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "lots", "65GiB", "1TiB", "NaN", "1e400"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestConfigBounds(t *testing.T) {
	for name, c := range map[string]Config{
		"negative size":   {Size: -1},
		"huge message":    {MsgSize: 2 << 20},
		"size under one":  {Size: 10, MsgSize: 1024},
		"too many rounds": {Rounds: 1001},
		"no file store":   {Stores: []string{StoreNats}},
		"unknown store":   {Stores: []string{StoreFile, "tape"}},
		"store twice":     {Stores: []string{StoreFile, StoreS3, StoreS3}},
		"negative keys":   {KVKeys: -1},
		"keeper env":      {KeeperEnv: []string{"NOEQUALS"}},
	} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err := Config{Size: 4096, MsgSize: 1024}.withDefaults()
	if err != nil || c.Subjects != 4 || c.Rounds != 5 || c.KVKeys != 10_000 || strings.Join(c.Stores, ",") != "file,nats,s3,age" {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

// FuzzParseSize: any text gives a size within the bounds or an error.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1GiB", "4MB", "1000", "2g", "1.5KiB", "", "-1", "NaN", "1e400", "0.0001B", "64GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && (n < 1 || n > MaxSize) {
			t.Fatalf("ParseSize(%q) = %d, outside 1..%d", s, n, int64(MaxSize))
		}
	})
}

func TestVerifyTook(t *testing.T) {
	log := `time=2026-11-30T13:25:59.547Z level=DEBUG msg="restore point verified" module=bench local=data point="bench/data f1-bench" bytes=1113846812 took=1.430494946s
time=2026-11-30T13:25:59.632Z level=INFO msg="restored stream" stream=KV_bench_data replicas=1 took=83.886356ms
time=2026-11-30T13:26:00.000Z level=DEBUG msg="restore point verified" module=b local=d point="b/d f1-x" bytes=10 took=70ms
garbage took=5s
time=2026-11-30T13:26:00.000Z level=DEBUG msg="restore point verified" took=nonsense
`
	if got, want := verifyTook(log), 1430494946*time.Nanosecond+70*time.Millisecond; got != want {
		t.Errorf("verifyTook = %v, want %v", got, want)
	}
	if got := verifyTook(""); got != 0 {
		t.Errorf("verifyTook of an empty log = %v, want 0", got)
	}
}

// TestClusterRun runs the cluster comparison with 1 MiB of R3 data on three
// nats-server processes: every comparison measured, every restore back at
// R3 and whole, the keeper's own state R3, and the report in a section of
// its own that neither run's rewrite erases. It asserts no time.
func TestClusterRun(t *testing.T) {
	res, err := Run(context.Background(), Config{Cluster: true, Size: 1 << 20, KVKeys: 100, SmallKVKeys: 10, Rounds: 2,
		Work: t.TempDir(), Command: "go test ./bench -run TestClusterRun"})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Pairs{"snapshot": res.Snapshot, "restore": res.Restore} {
		if len(p.Keeper) != 2 || len(p.Nats) != 2 {
			t.Errorf("%s: %d keeper and %d nats samples, want 2 and 2", name, len(p.Keeper), len(p.Nats))
		}
		for _, s := range append(p.Keeper, p.Nats...) {
			if s.Wall <= 0 || s.PeakRSS <= 0 {
				t.Errorf("%s: a sample without wall time or peak RSS: %+v", name, s)
			}
		}
	}
	if len(res.AsideRestore.Keeper) != 2 || len(res.SmallKV.Keeper) != 0 || len(res.Stores) != 0 {
		t.Errorf("%d aside + restore, %d small KV and %d store samples, want 2, 0 and 0", len(res.AsideRestore.Keeper), len(res.SmallKV.Keeper), len(res.Stores))
	}
	cl := res.Cluster
	if cl.IndexReplicas != 3 || cl.ActsReplicas != 3 || cl.Formed <= 0 || len(cl.Commands) != 3 {
		t.Errorf("cluster: index R%d, acts R%d, formed in %v, %d server commands; want R3, R3, some time, 3", cl.IndexReplicas, cl.ActsReplicas, cl.Formed, len(cl.Commands))
	}
	by := map[string]int{}
	for _, rc := range cl.Restores {
		by[rc.By]++
		if rc.Replicas[dataStream] != 3 || rc.Replicas[kvStream] != 3 || len(rc.Replicas) != 2 {
			t.Errorf("%s restored %v, want both streams at R3", rc.By, rc.Replicas)
		}
	}
	if by[restoreByKeeper] != 2 || by[restoreByNats] != 2 || by[restoreLive] != 2 {
		t.Errorf("restores checked: %v, want 2 of each", by)
	}

	// Into a file with the single-server run's markers and hand-written text:
	// the cluster part goes right after that run's end marker; written again,
	// it is replaced in place; the single-server run's rewrite keeps it.
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	hand := "# Benchmarks\n\nIntro.\n\n" + BeginMarker + "\nold figures\n" + EndMarker + "\n\n## Levers\n\nHand-written levers.\n"
	if err := os.WriteFile(out, []byte(hand), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for range 2 {
		if err := WriteReport(out, res); err != nil {
			t.Fatal(err)
		}
	}
	s := read()
	want := "# Benchmarks\n\nIntro.\n\n" + BeginMarker + "\nold figures\n" + EndMarker + "\n\n" + ClusterBeginMarker + "\n" + res.ClusterMarkdown() +
		ClusterEndMarker + "\n\n## Levers\n\nHand-written levers.\n"
	if s != want {
		t.Errorf("the cluster report was not put after the end marker once:\n%s", s)
	}
	for _, w := range []string{"## On a cluster of three", "**The machine is shared**", "`nats backup stream`", "`nats backup restore stream`",
		"three servers' CPU, summed", "Load average as each phase began: the snapshot pairs: ", "; the restores with the kept data live: ", "`KV_kept` R3", "`KEEPER_ACTS` R3", "`KV_bench_data` R3, `bench_data` R3", "--cluster_name bench", res.LoadBefore} {
		if !strings.Contains(s, w) {
			t.Errorf("the cluster report lacks %q:\n%s", w, s)
		}
	}
	single := *res
	single.Config.Cluster = false
	if err := WriteReport(out, &single); err != nil {
		t.Fatal(err)
	}
	if s := read(); strings.Contains(s, "old figures") || !strings.Contains(s, ClusterBeginMarker+"\n"+res.ClusterMarkdown()+ClusterEndMarker+"\n") ||
		!strings.HasSuffix(s, "## Levers\n\nHand-written levers.\n") {
		t.Errorf("the single-server rewrite did not keep the cluster part:\n%s", s)
	}
}
