// Command keeper-bench measures nats-keeper against the nats CLI's own backup
// and restore and writes the figures into BENCHMARKS.md:
//
//	go run ./cmd/keeper-bench -size 1GiB -rounds 5 -out BENCHMARKS.md
//
// It installs the pinned nats-server and nats CLI through the Go module proxy
// (cached), builds nats-keeper, starts both on 127.0.0.1 with their data in a
// temporary directory, fills a kept data, and times the comparisons of
// issue 6 in alternating pairs; then the same verbs of a keeper on each other
// store backend (-stores: a JetStream object store on a second nats-server,
// versitygw for S3) in pairs with the file backend's. With -cluster it
// measures on three nats-server processes in one JetStream cluster instead:
//
//	go run ./cmd/keeper-bench -cluster -size 256MiB -rounds 3 -out BENCHMARKS.md
//
// -shapes names the data shapes to measure (default all: random, compressible,
// module, rollback, delta, nonprefix, diff, logical, points, consumers, bigkv,
// busybus, capture, capture-zip, capture-module), each against the nats CLI
// (busybus: a small KV's snapshot and dry run among other modules' streams;
// nonprefix: against the keeper's own full rollback; diff: against its
// target; the capture shapes: against issue 41's targets):
//
//	go run ./cmd/keeper-bench -shapes compressible,rollback -size 64MiB -rounds 3 -out -
//
// See package bench.
//
// It imports package bench only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-keeper/nats-keeper/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	cfg, out, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "keeper-bench failed: %v\n", err)
		if errors.Is(err, context.Canceled) {
			return 130
		}
		return 1
	}
	return report(res, cfg.Cluster, out, stderr)
}

// report writes the figures of res to out (- for stdout), the cluster's
// when cluster, and is the exit code: 1 when it could not be written or a
// shape stopped part-way.
func report(res *bench.Result, cluster bool, out string, stderr io.Writer) int {
	if out == "-" {
		if cluster {
			fmt.Print(res.ClusterMarkdown())
		} else {
			fmt.Print(res.Markdown())
		}
		return shapesFailed(res, stderr)
	}
	if err := bench.WriteReport(out, res); err != nil {
		fmt.Fprintf(stderr, "keeper-bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "wrote %s\n", out)
	return shapesFailed(res, stderr)
}

// benchFlags are keeper-bench's flags: those that go straight into a
// bench.Config, and the texts that are checked once they are parsed.
type benchFlags struct {
	fs                                *flag.FlagSet
	size, stores, shapes, points, out *string
}

// newFlags defines keeper-bench's flags, into cfg where they need no check.
func newFlags(cfg *bench.Config, stderr io.Writer) benchFlags {
	fs := flag.NewFlagSet("keeper-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "1GiB", "payload bytes of the kept data's stream (1 KiB random messages)")
	fs.IntVar(&cfg.MsgSize, "msg-size", 1024, "payload bytes of one message")
	fs.IntVar(&cfg.KVKeys, "kv-keys", 10_000, "keys of the kept data's KV bucket")
	fs.IntVar(&cfg.SmallKVKeys, "small-kv-keys", 1_000, "keys of the small KV bucket")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "alternating pairs of each big comparison")
	fs.IntVar(&cfg.SmallRounds, "small-rounds", 20, "alternating pairs of the small-KV round trip")
	fs.StringVar(&cfg.Work, "work", "", "where to make the run's temporary directory (default the system's)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary directory afterwards")
	fs.StringVar(&cfg.Perf, "perf", "", "profile the first round of each operation (keeper and nats-server) with Linux perf into this directory")
	fs.Func("keeper-env", "KEY=VALUE added to nats-keeper serve's environment only (repeatable), e.g. GOMEMLIMIT=40MiB", func(v string) error {
		cfg.KeeperEnv = append(cfg.KeeperEnv, v)
		return nil
	})
	stores := fs.String("stores", strings.Join(bench.DefaultStores(), ","), "store backends to measure against the file backend: file (always), nats (an object store on a second nats-server), bus (an object store on the bus itself), s3 (versitygw), age (a directory, every archive encrypted at rest with --encrypt-to and --identity)")
	fs.BoolVar(&cfg.Cluster, "cluster", false, "measure on three nats-server processes in one JetStream cluster instead, with R3 kept data "+
		"(snapshot and restore against the nats CLI, file backend only; default -size 256MiB); the report gets a section of its own")
	shapes := fs.String("shapes", strings.Join(bench.AllShapes(), ","), "data shapes to measure, a comma list of "+strings.Join(bench.AllShapes(), ", ")+
		" (random is the comparison above with the store backends; each other shape runs on a nats-server and keeper of its own; -cluster: random only)")
	points := fs.String("points", "100,1000,10000", "tiers of the points shape: kept data, each with one point, reached one after the other")
	fs.IntVar(&cfg.Consumers, "consumers", 2_000, "durable consumers of the consumers shape")
	fs.IntVar(&cfg.BigKVKeys, "big-kv-keys", 200_000, "keys of the bigkv shape's KV bucket")
	fs.BoolVar(&cfg.StoresOnly, "stores-only", false, "measure only the store comparisons (each backend of -stores against the file backend), not the comparisons against the nats CLI")
	out := fs.String("out", "BENCHMARKS.md", "the report to write (between its keeper-bench markers when it has them); - for stdout")
	return benchFlags{fs: fs, size: size, stores: stores, shapes: shapes, points: points, out: out}
}

// parseFlags parses args into the run's bench.Config and the report's
// path; false (exit 2) when they are refused, said on stderr.
func parseFlags(args []string, stderr io.Writer) (bench.Config, string, bool) {
	var cfg bench.Config
	f := newFlags(&cfg, stderr)
	fs, size, stores, shapes, points := f.fs, f.size, f.stores, f.shapes, f.points
	if err := fs.Parse(args); err != nil {
		return cfg, "", false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keeper-bench takes no arguments, only flags (got %q); nothing was run\n", fs.Args())
		return cfg, "", false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Cluster && !set["size"] {
		*size = "256MiB"
	}
	if cfg.Cluster && set["stores"] {
		fmt.Fprintf(stderr, "-stores: the cluster comparison measures the file backend only; nothing was run\n")
		return cfg, "", false
	}
	n, err := bench.ParseSize(*size)
	if err != nil {
		fmt.Fprintf(stderr, "-size: %v; nothing was run\n", err)
		return cfg, "", false
	}
	cfg.Size = n
	if !cfg.Cluster {
		if cfg.Stores, err = bench.ParseStores(*stores); err != nil {
			fmt.Fprintf(stderr, "-stores: %v\n", err)
			return cfg, "", false
		}
	}
	if !cfg.Cluster || set["shapes"] {
		if cfg.Shapes, err = bench.ParseShapes(*shapes); err != nil {
			fmt.Fprintf(stderr, "-shapes: %v\n", err)
			return cfg, "", false
		}
	}
	if cfg.Points, err = bench.ParseInts(*points); err != nil {
		fmt.Fprintf(stderr, "-points: %v; nothing was run\n", err)
		return cfg, "", false
	}
	cfg.Command = "go run ./cmd/keeper-bench " + strings.Join(args, " ")
	cfg.Log = slog.New(slog.NewTextHandler(stderr, nil))
	return cfg, *f.out, true
}

// shapesFailed says which shapes stopped part-way (their figures so far are
// in the report) and is then 1.
func shapesFailed(res *bench.Result, stderr io.Writer) int {
	code := 0
	for _, s := range res.Shapes {
		if s.Failed != "" {
			fmt.Fprintf(stderr, "keeper-bench: the %s shape stopped part-way: %s\n", s.Shape, s.Failed)
			code = 1
		}
	}
	return code
}
