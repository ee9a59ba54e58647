package natsstore

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
)

// clusterEnv, set to a directory, makes the test binary serve a three-node
// cluster there instead of running tests: a memory test then measures the
// client alone.
const clusterEnv = "NATSSTORE_TEST_CLUSTER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(clusterEnv); dir != "" {
		os.Exit(serveCluster(dir))
	}
	os.Exit(m.Run())
}

// serveCluster starts three clustered servers under dir, prints their client
// URLs on one line, and stops them when stdin closes (the parent ended).
func serveCluster(dir string) int {
	ports := make([]int, 3)
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i]))
	}
	var srvs []*server.Server
	var urls []string
	for i := range ports {
		o := natstest.Options(filepath.Join(dir, fmt.Sprint(i)))
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Cluster = server.ClusterOpts{Name: "vault", Host: "127.0.0.1", Port: ports[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
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

// clusterProcess starts a three-node cluster in a child process and
// connects to it.
func clusterProcess(t *testing.T) jetstream.JetStream {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), clusterEnv+"="+t.TempDir())
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
