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
// module, rollback, points, consumers, bigkv, busybus), each against the nats CLI
// (busybus: a small KV's snapshot and dry run among other modules' streams):
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
	fs := flag.NewFlagSet("keeper-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "1GiB", "payload bytes of the kept data's stream (1 KiB random messages)")
	var cfg bench.Config
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keeper-bench takes no arguments, only flags (got %q); nothing was run\n", fs.Args())
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Cluster && !set["size"] {
		*size = "256MiB"
	}
	if cfg.Cluster && set["stores"] {
		fmt.Fprintf(stderr, "-stores: the cluster comparison measures the file backend only; nothing was run\n")
		return 2
	}
	n, err := bench.ParseSize(*size)
	if err != nil {
		fmt.Fprintf(stderr, "-size: %v; nothing was run\n", err)
		return 2
	}
	cfg.Size = n
	if !cfg.Cluster {
		if cfg.Stores, err = bench.ParseStores(*stores); err != nil {
			fmt.Fprintf(stderr, "-stores: %v\n", err)
			return 2
		}
	}
	if !cfg.Cluster || set["shapes"] {
		if cfg.Shapes, err = bench.ParseShapes(*shapes); err != nil {
			fmt.Fprintf(stderr, "-shapes: %v\n", err)
			return 2
		}
	}
	if cfg.Points, err = bench.ParseInts(*points); err != nil {
		fmt.Fprintf(stderr, "-points: %v; nothing was run\n", err)
		return 2
	}
	cfg.Command = "go run ./cmd/keeper-bench " + strings.Join(args, " ")
	cfg.Log = slog.New(slog.NewTextHandler(stderr, nil))

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
	if *out == "-" {
		if cfg.Cluster {
			fmt.Print(res.ClusterMarkdown())
		} else {
			fmt.Print(res.Markdown())
		}
		return shapesFailed(res, stderr)
	}
	if err := bench.WriteReport(*out, res); err != nil {
		fmt.Fprintf(stderr, "keeper-bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "wrote %s\n", *out)
	return shapesFailed(res, stderr)
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
