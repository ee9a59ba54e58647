package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/verbs"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// keeperBin is the nats-keeper binary TestMain builds once for every test,
// with -tags testhooks: the tests that kill a keeper at a restore step, hold
// a restore, or move its clock set its test hooks through the environment,
// which a release build does not read (cmd/nats-keeper/crashhook.go).
var keeperBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nats-keeper-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goBin, err := tools.GoCommand()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	keeperBin = filepath.Join(dir, "nats-keeper")
	cmd := exec.Command(goBin, append([]string{"build", "-tags", "testhooks", "-o", keeperBin}, revisionFlags()...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build nats-keeper: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// revisionFlags are the go build flags that give the binary its git
// revision where the build does not stamp it (a git worktree, or
// -buildvcs=false in GOFLAGS), as the README's Upgrading says; none
// outside a git checkout.
func revisionFlags() []string {
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return []string{"../cmd/nats-keeper"}
	}
	return []string{"-ldflags", "-X main.revision=" + strings.TrimSpace(string(rev)), "../cmd/nats-keeper"}
}

// tail is the end of a log, enough to see why something failed.
func tail(s string) string {
	const n = 6000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// cleanEnv keeps child processes away from the user's nats contexts and
// from any NATS_ setting of the test's own environment.
func cleanEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	return append(env, extra...)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is one child process and the channel its end arrives on.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited closes
	log    *syncbuf.Buffer
}

// startProc starts cmd; the process is killed, if still running, when owner
// ends.
func startProc(t, owner *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, exited: make(chan struct{}), log: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	owner.Cleanup(func() {
		if !p.done() {
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends sig and waits up to limit for the process to end.
func (p *proc) stop(t *testing.T, sig syscall.Signal, limit time.Duration) {
	t.Helper()
	if p.done() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not end within %s of %v; it was killed\n%s", filepath.Base(p.cmd.Path), limit, sig, tail(p.log.String()))
	}
}

// natsServer is a nats-server process that can be stopped and started again
// on the same port and store.
type natsServer struct {
	bin, store string
	port       int
	args       []string // more command line arguments (a cluster's)
	p          *proc
	owner      *testing.T // the test the server lives as long as
}

func startNatsServer(t *testing.T, bin, store string) *natsServer {
	t.Helper()
	s := &natsServer{bin: bin, store: store, port: freePort(t), owner: t}
	s.start(t)
	t.Cleanup(func() { s.p.stop(t, syscall.SIGTERM, time.Minute) })
	return s
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start runs the server and waits until it accepts connections and
// JetStream answers.
func (s *natsServer) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(s.bin, append([]string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", s.store}, s.args...)...)
	s.p = startProc(t, s.owner, cmd)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if s.p.done() {
			t.Fatalf("nats-server exited: %v\n%s", s.p.err, tail(s.p.log.String()))
		}
		nc, err := nats.Connect(s.url())
		if err == nil {
			_, err = nc.Request("$JS.API.INFO", nil, 2*time.Second)
			nc.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not answer JetStream requests: %v\n%s", err, tail(s.p.log.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restart stops the server with SIGTERM (a clean restart, so the store is
// whole) and starts it again on the same port and store.
func (s *natsServer) restart(t *testing.T) {
	t.Helper()
	s.p.stop(t, syscall.SIGTERM, time.Minute)
	s.start(t)
}

// keeperProc is one `nats-keeper serve` process.
type keeperProc struct {
	url, dir, home string
	p              *proc
}

// startKeeper runs nats-keeper serve on dir with extra environment entries.
func startKeeper(t *testing.T, url, dir, home string, extraEnv ...string) *keeperProc {
	t.Helper()
	return startKeeperArgs(t, url, dir, home, nil, extraEnv...)
}

// startKeeperArgs is startKeeper with more command line arguments (such as
// --bucket and --prefix).
func startKeeperArgs(t *testing.T, url, dir, home string, args []string, extraEnv ...string) *keeperProc {
	t.Helper()
	cmd := exec.Command(keeperBin, append([]string{"serve", "--server", url, "--dir", dir, "--log-format", "json"}, args...)...)
	cmd.Env = cleanEnv(home, extraEnv...)
	return &keeperProc{url: url, dir: dir, home: home, p: startProc(t, t, cmd)}
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	events := &syncbuf.Buffer{}
	note := func(format string, args ...any) {
		fmt.Fprintf(events, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ReconnectBufSize(64<<20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { note("disconnected: %v", err) }),
		nats.ReconnectHandler(func(*nats.Conn) { note("reconnected") }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { note("error: %v", err) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		if t.Failed() && events.String() != "" {
			t.Logf("the test's connection to %s:\n%s", url, events.String())
		}
	})
	return nc
}

// serviceIDs asks every nats-keeper for its PING and returns the ids that
// answered within wait.
func serviceIDs(nc *nats.Conn, wait time.Duration) map[string]bool {
	ids := map[string]bool{}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return ids
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.PING."+verbs.ServiceName, inbox, nil); err != nil {
		return ids
	}
	end := time.Now().Add(wait)
	for {
		m, err := sub.NextMsg(time.Until(end))
		if err != nil {
			return ids
		}
		var ping struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m.Data, &ping) == nil && ping.ID != "" {
			ids[ping.ID] = true
		}
	}
}

// waitKeepers waits until n keepers answer the micro PING, failing if any of
// the given keepers exits first.
func waitKeepers(t *testing.T, nc *nats.Conn, n int, ks ...*keeperProc) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		for _, k := range ks {
			if k.p.done() {
				t.Fatalf("nats-keeper serve exited: %v\n%s", k.p.err, tail(k.p.log.String()))
			}
		}
		if len(serviceIDs(nc, 300*time.Millisecond)) >= n {
			return
		}
		if time.Now().After(deadline) {
			var logs []string
			for _, k := range ks {
				logs = append(logs, tail(k.p.log.String()))
			}
			t.Fatalf("%d nats-keeper(s) never answered:\n%s", n, strings.Join(logs, "\n----\n"))
		}
	}
}

// reply is one verb's answer as it came over the wire.
type reply struct {
	Code int            // 200 for success, else Nats-Service-Error-Code
	Said string         // the success reply's said, or the error sentence
	Body map[string]any // the decoded reply body
	Err  error          // no answer at all
}

// call sends body to <prefix>.<verb> (the default prefix) and waits up to
// limit.
func call(ctx context.Context, nc *nats.Conn, verb string, body []byte, limit time.Duration) reply {
	return callAt(ctx, nc, verbs.DefaultPrefix, verb, body, limit)
}

// callAt is call on the verbs of another prefix.
func callAt(ctx context.Context, nc *nats.Conn, prefix, verb string, body []byte, limit time.Duration) reply {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, prefix+"."+verb, body)
	if err != nil {
		return reply{Err: err}
	}
	r := reply{Code: 200, Body: map[string]any{}}
	if c := m.Header.Get("Nats-Service-Error-Code"); c != "" {
		r.Code, _ = strconv.Atoi(c)
		r.Said = m.Header.Get("Nats-Service-Error")
	}
	if err := json.Unmarshal(m.Data, &r.Body); err != nil {
		r.Err = fmt.Errorf("the reply %q is not a JSON object: %w", m.Data, err)
		return r
	}
	if s, ok := r.Body["said"].(string); ok && r.Code == 200 {
		r.Said = s
	}
	if s, ok := r.Body["error"].(string); ok && r.Code != 200 {
		r.Said = s
	}
	return r
}

func (r reply) String() string {
	if r.Err != nil {
		return "no reply: " + r.Err.Error()
	}
	return fmt.Sprintf("%d %s", r.Code, r.Said)
}

// mustCall sends a verb that must succeed.
func mustCall(t *testing.T, nc *nats.Conn, verb string, req any) reply {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r := call(context.Background(), nc, verb, body, 10*time.Minute)
	if r.Err != nil || r.Code != 200 {
		t.Fatalf("%s %s: %s", verb, body, r)
	}
	return r
}
