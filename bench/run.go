package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// Sample is the cost of one timed operation.
type Sample struct {
	Wall      time.Duration
	ClientCPU time.Duration // CPU of the keeper process, or of the nats CLI processes
	ClientSys time.Duration // the part of ClientCPU spent in the kernel
	PeakRSS   int64         // of the keeper during the operation, or the largest nats CLI process
	ServerCPU time.Duration // CPU the nats-server process used meanwhile
	ServerSys time.Duration // the part of ServerCPU spent in the kernel
	StoreCPU  time.Duration // CPU the store's own server used meanwhile (the vault's nats-server, versitygw; 0 for file and bus)
	StoreSys  time.Duration // the part of StoreCPU spent in the kernel
	Verify    time.Duration // the keeper's verification of the whole point before a restore, from its log (only with live data)
}

// Pairs are the samples of one comparison, keeper[i] and nats[i] taken one
// after the other.
type Pairs struct {
	Keeper, Nats []Sample
}

// Result is one run's figures and what they were taken on.
type Result struct {
	Config  Config
	Machine Machine
	Keeper  string // `nats-keeper version`
	Server  string // nats-server version
	NatsCLI string
	Data    filled

	Snapshot     Pairs         // snapshot-kept against nats backup stream (both streams)
	Restore      Pairs         // restore-kept into an absent kept data against nats backup restore stream
	AsideRestore Pairs         // restore-kept with the kept data live: Keeper only
	SmallKV      Pairs         // snapshot-kept round trip of the small KV against nats backup stream KV_small_kv
	Stores       []StoreResult // each backend other than file against the file backend, in pairs
	VersityGW    string        // version, when the s3 store was measured
	Cluster      ClusterFacts  // on the cluster only

	ArchiveSize   int64 // bytes of the keeper's bus.tar
	KeeperRunPeak int64 // VmHWM of the keeper over the whole run
	PeakExact     bool  // per-operation keeper peaks (clear_refs worked)
	Commands      []string
	StoreCommands []string // what the store comparisons start: the store servers and their keepers
	Started       time.Time
	Took          time.Duration
	LoadBefore    string // /proc/loadavg when the run began and ended: other work on the machine
	LoadAfter     string
	PhaseLoads    []string      // "<phase>: <load average>" as each phase of the big comparisons began
	ServerRestore []Sample      // the server's own restore of the random shape's two streams (shape_server.go)
	Shapes        []ShapeResult // the shapes other than random, each on its own server and keeper
}

// run holds what a benchmark run has started.
type run struct {
	cfg     Config
	work    string
	env     []string
	nats    string // the nats CLI
	url     string
	server  *proc        // the nats-server r.nc was first given; on the cluster, its first member
	peers   []*proc      // the cluster's other members (none on one server)
	vault   *proc        // the nats store's own nats-server, when measured
	gw      *proc        // versitygw, when the s3 store is measured
	keepers []*keeperSvc // the file backend's first, then one per other store
	nc      *nats.Conn
	res     *Result
	prof    *profiler
}

// Run runs the whole benchmark and returns its figures. It removes everything
// it made unless cfg.Keep.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.Work, "keeper-bench-")
	if err != nil {
		return nil, fmt.Errorf("make the run's directory: %w, so nothing was run", err)
	}
	r := &run{cfg: cfg, work: work, env: cleanEnv(filepath.Join(work, "home")),
		res:  &Result{Config: cfg, Machine: machine(), Started: time.Now().UTC(), LoadBefore: loadAverage()},
		prof: &profiler{dir: cfg.Perf, done: map[string]bool{}}}
	defer func() {
		r.close()
		if !cfg.Keep {
			os.RemoveAll(work)
		} else {
			cfg.Log.Info("kept the run's directory", "dir", work)
		}
	}()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	if cfg.hasShape(ShapeRandom) {
		if err := r.measureRandom(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.measureShapes(ctx); err != nil {
		return nil, err
	}
	r.res.Took = time.Since(r.res.Started)
	r.res.LoadAfter = loadAverage()
	return r.res, nil
}

// measureRandom fills the random shape's kept data and measures it: the
// comparisons of issue 6 and the server's own restore, then the store
// backends; or, on the cluster, the cluster's comparisons.
func (r *run) measureRandom(ctx context.Context) error {
	cfg := r.cfg
	cfg.Log.Info("filling the kept data", "bytes", cfg.Size, "message size", cfg.MsgSize)
	f, err := fill(ctx, r.nc, cfg)
	if err != nil {
		return fmt.Errorf("fill the kept data: %w", err)
	}
	r.res.Data = *f
	cfg.Log.Info("filled", "messages", f.Messages, "bytes", f.Bytes, "took", f.Took)
	if cfg.Cluster {
		return r.measureCluster(ctx)
	}
	if !cfg.StoresOnly {
		if err := r.measure(ctx); err != nil {
			return err
		}
		if err := r.measureServerRestore(ctx); err != nil {
			return err
		}
	}
	return r.measureStores(ctx)
}

// start installs the tools, builds the keeper, and starts the server and the
// keeper.
func (r *run) start(ctx context.Context) error {
	log := r.cfg.Log
	log.Info("installing the pinned nats-server and nats CLI (once; cached afterwards)")
	serverBin, err := tools.NatsServerPath(ctx)
	if err != nil {
		return fmt.Errorf("install nats-server: %w", err)
	}
	if r.nats, err = tools.NatsCLIPath(ctx); err != nil {
		return fmt.Errorf("install the nats CLI: %w", err)
	}
	if r.cfg.WrapNatsCLI != nil {
		if r.nats, err = r.cfg.WrapNatsCLI(r.nats); err != nil {
			return fmt.Errorf("wrap the nats CLI: %w", err)
		}
	}
	keeperBin := filepath.Join(r.work, "nats-keeper")
	log.Info("building nats-keeper")
	build := exec.CommandContext(ctx, "go", "build", "-o", keeperBin, "github.com/nats-keeper/nats-keeper/cmd/nats-keeper")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build nats-keeper: %w\n%s", err, out)
	}
	for _, d := range []string{"home", "store", "keeper", "nats-backup", "s3"} {
		if err := os.MkdirAll(filepath.Join(r.work, d), 0o700); err != nil {
			return err
		}
	}
	r.res.Keeper = version(ctx, keeperBin, "version")
	if rev := version(ctx, "git", "describe", "--always", "--dirty"); !strings.HasPrefix(rev, "unknown") {
		r.res.Keeper += ", commit " + rev
	}
	r.res.Server = version(ctx, serverBin, "--version")
	r.res.NatsCLI = version(ctx, r.nats, "--version")

	if r.cfg.Cluster {
		err = r.startCluster(ctx, serverBin)
	} else {
		err = r.startServer(ctx, serverBin)
	}
	if err != nil {
		return err
	}
	file, err := r.startKeeper(ctx, keeperBin, keeperSpec{store: StoreFile})
	if err != nil {
		return err
	}
	r.res.PeakExact = resetPeakRSS(file.proc.pid()) == nil
	if r.cfg.Cluster {
		return r.checkKeeperReplicas(ctx)
	}
	return r.startStores(ctx, keeperBin, serverBin)
}

// startServer starts the one nats-server and connects to it.
func (r *run) startServer(ctx context.Context, serverBin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	r.url = "nats://127.0.0.1:" + strconv.Itoa(port)
	r.server, err = startProc("nats-server", r.env, serverBin, "-js", "-sd", filepath.Join(r.work, "store"),
		"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-n", "bench")
	if err != nil {
		return err
	}
	r.nc, err = connectRetry(ctx, r.url, r.server)
	return err
}

// serverPIDs is the nats-server processes of the bus: one, or the cluster's
// three, whose CPU is summed.
func (r *run) serverPIDs() []int {
	pids := []int{r.server.pid()}
	for _, p := range r.peers {
		pids = append(pids, p.pid())
	}
	return pids
}

// shownURL is the --server of the keeper and the nats CLI as the report
// shows it.
func (r *run) shownURL() string {
	if r.cfg.Cluster {
		return "nats://127.0.0.1:PORT1,nats://127.0.0.1:PORT2,nats://127.0.0.1:PORT3"
	}
	return "nats://127.0.0.1:PORT"
}

func connectRetry(ctx context.Context, url string, server *proc) (*nats.Conn, error) {
	for deadline := time.Now().Add(30 * time.Second); ; {
		nc, err := nats.Connect(url, nats.Name("keeper-bench"), nats.MaxReconnects(-1))
		if err == nil {
			return nc, nil
		}
		if !server.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("nats-server at %s did not take a connection (%v); its log:\n%s", url, err, server.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func version(ctx context.Context, bin string, args ...string) string {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// close stops the keepers, the store servers and the server.
func (r *run) close() {
	if r.nc != nil {
		r.nc.Close()
	}
	for i, k := range r.keepers {
		if peak, err := peakRSS(k.proc.pid()); i == 0 && err == nil && r.res.KeeperRunPeak == 0 && !r.res.PeakExact {
			r.res.KeeperRunPeak = peak
		}
		if err := k.proc.stop(time.Minute); err != nil {
			r.cfg.Log.Warn("stopping the keeper", "store", k.store, "err", err)
		}
		// The keeper's own timings of each step: beside the profiles, or in
		// the kept directory.
		log := "keeper.log"
		if k.store != StoreFile {
			log = "keeper-" + k.store + ".log"
		}
		if r.cfg.Perf != "" {
			_ = os.WriteFile(filepath.Join(r.cfg.Perf, log), []byte(k.proc.log.String()), 0o644)
		} else if r.cfg.Keep {
			_ = os.WriteFile(filepath.Join(r.work, log), []byte(k.proc.log.String()), 0o644)
		}
	}
	r.stopSides()
	for _, p := range append([]*proc{r.server}, r.peers...) {
		if p == nil {
			continue
		}
		if err := p.stop(time.Minute); err != nil && !errors.Is(err, context.Canceled) {
			r.cfg.Log.Debug("stopping "+p.name, "err", err)
		}
	}
}
