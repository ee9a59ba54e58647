// Package embedded starts nats-servers with JetStream inside this process:
// the one `nats-keeper serve --embedded` and `nats-keeper demo` run, and the
// ones the tests and the keepertest harness run. It links no test code, so
// the nats-keeper binary can use it.
//
// It imports nats-server only, and no package of this module.
package embedded

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ReadyWithin is how long Run waits for a server to accept connections. A
// minute: on a loaded machine a server of a cluster took over 10 s
// (TestLargeObjectR3's child process, in CI).
const ReadyWithin = time.Minute

// Options returns the options of one JetStream server storing under dir,
// listening on 127.0.0.1 on a random port, without logs or signal handlers.
func Options(dir string) *server.Options {
	return &server.Options{
		ServerName: "keeper-test",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}
}

// Run starts a server with opts and waits until it accepts connections. A
// server that does not become ready within ReadyWithin is shut down.
func Run(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats-server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(ReadyWithin) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats-server did not become ready in %s", ReadyWithin)
	}
	return s, nil
}

// ClusterOptions are the options of a cluster named name of one server per
// directory in dirs, on free loopback ports, each routed to all.
func ClusterOptions(name string, dirs []string) ([]*server.Options, error) {
	ports := make([]int, len(dirs))
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port for cluster %s: %w", name, err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i]))
	}
	var out []*server.Options
	for i, dir := range dirs {
		o := Options(dir)
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Cluster = server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: ports[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		out = append(out, o)
	}
	return out, nil
}

// RunCluster starts one server per options in opts (from ClusterOptions).
// If one fails, those already started are shut down.
func RunCluster(opts []*server.Options) ([]*server.Server, error) {
	var srvs []*server.Server
	for _, o := range opts {
		s, err := Run(o)
		if err != nil {
			Shutdown(srvs...)
			return nil, err
		}
		srvs = append(srvs, s)
	}
	return srvs, nil
}

// Shutdown stops each server and waits until it has stopped.
func Shutdown(srvs ...*server.Server) {
	for _, s := range srvs {
		s.Shutdown()
		s.WaitForShutdown()
	}
}
