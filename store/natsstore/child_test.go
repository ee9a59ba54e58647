package natsstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
)

// clusterEnv, set to "<n> <directory>", makes the test binary serve n
// JetStream servers there (n > 1: a cluster) instead of running tests: a
// memory test then measures the client alone.
const clusterEnv = "NATSSTORE_TEST_SERVERS"

// writeEnv, set to "<server URL> <bucket> <key>", makes the test binary
// write an endless object there until it is killed.
const writeEnv = "NATSSTORE_TEST_WRITE"

func TestMain(m *testing.M) {
	if c := strings.Fields(os.Getenv(clusterEnv)); len(c) == 2 {
		n, _ := strconv.Atoi(c[0])
		os.Exit(serveCluster(n, c[1]))
	}
	if w := os.Getenv(writeEnv); w != "" {
		os.Exit(writeForever(strings.Fields(w)))
	}
	os.Exit(m.Run())
}

func writeForever(args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nc, err := nats.Connect(args[0])
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	s, err := Open(ctx, js, args[1], Options{})
	if err != nil {
		return fail(err)
	}
	w, err := s.Create(ctx, args[2])
	if err != nil {
		return fail(err)
	}
	_, err = io.Copy(w, newPattern(7, 1<<40))
	return fail(err)
}

// serveCluster starts n servers under dir (clustered when n > 1), prints
// their client URLs on one line, and stops them when stdin closes (the
// parent ended).
func serveCluster(n int, dir string) int {
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(dir, fmt.Sprint(i))
	}
	opts := []*server.Options{natstest.Options(dirs[0])}
	if n > 1 {
		var err error
		if opts, err = natstest.ClusterOptions("vault", dirs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var srvs []*server.Server
	var urls []string
	for _, o := range opts {
		s, err := natstest.Run(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		srvs = append(srvs, s)
		urls = append(urls, s.ClientURL())
	}
	fmt.Println(strings.Join(urls, ","))
	io.Copy(io.Discard, os.Stdin)
	for _, s := range srvs {
		s.Shutdown()
		s.WaitForShutdown()
	}
	return 0
}

// serversProcess starts n servers (n > 1: a cluster) in a child process
// and connects to them.
func serversProcess(t *testing.T, n int) jetstream.JetStream {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", clusterEnv, n, t.TempDir()))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the cluster process printed no URLs: %v", err)
	}
	nc, err := nats.Connect(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
