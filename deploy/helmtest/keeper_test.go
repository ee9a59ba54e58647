package helmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// keeperBin is the nats-keeper binary of this checkout, built once by
// TestMain; keeperBinErr says why it could not be.
var (
	keeperBin    string
	keeperBinErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "helmtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	keeperBin, keeperBinErr = buildKeeper(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildKeeper builds ../../cmd/nats-keeper (the main module, which this
// module does not import: the chart runs the binary) into dir, with
// -tags testhooks for the schedule tick startKeeper sets, which a release
// build does not read.
func buildKeeper(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build nats-keeper with: %w", err)
	}
	bin := filepath.Join(dir, "nats-keeper")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "-C", "../..", "build", "-tags", "testhooks", "-o", bin, "./cmd/nats-keeper")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/nats-keeper: %w\n%s", err, out)
	}
	return bin, nil
}

func binary(t *testing.T) string {
	t.Helper()
	if keeperBinErr != nil {
		t.Fatal(keeperBinErr)
	}
	return keeperBin
}

// helpOf is `nats-keeper <command> --help`.
func helpOf(t *testing.T, command ...string) string {
	t.Helper()
	out, err := exec.Command(binary(t), append(command, "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("nats-keeper %s --help: %v\n%s", strings.Join(command, " "), err, out)
	}
	return string(out)
}

// runningKeeper is `nats-keeper serve --embedded` run as a process, as the
// chart runs it: its --dir a directory it makes inside a world-writable,
// setgid one (an emptyDir), its metrics on --metrics-listen.
type runningKeeper struct {
	natsURL    string
	metricsURL string
}

// startKeeper starts the keeper and waits for it to log its server's URL
// and its metrics listener's address, and that it serves the verbs. It is stopped with SIGTERM when the
// test ends.
func startKeeper(t *testing.T) *runningKeeper {
	t.Helper()
	emptyDir := filepath.Join(t.TempDir(), "emptydir")
	if err := os.Mkdir(emptyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// What an emptyDir with the chart's fsGroup is: open to all, its group
	// inherited (setgid).
	if err := os.Chmod(emptyDir, os.ModeSetgid|0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "serve", "--embedded", "--listen", "127.0.0.1:0",
		"--dir", filepath.Join(emptyDir, "keeper"), "--metrics-listen", "127.0.0.1:0", "--log-format", "json")
	// The schedule loop looks every second, not every 20: the schedule
	// metrics are set by its passes.
	cmd.Env = append(os.Environ(), "NATS_KEEPER_TEST_SCHEDULE_TICK=1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		wg.Wait()
		_ = cmd.Wait()
	})
	found := make(chan *runningKeeper, 1)
	wg.Go(func() { scanLog(t, stderr, found) })
	select {
	case k := <-found:
		if k == nil {
			t.Fatal("the keeper ended before it logged its server's URL and its metrics address")
		}
		return k
	case <-time.After(2 * time.Minute): // a bound on start-up, not a timing assertion
		t.Fatal("the keeper did not log its server's URL and metrics address within 2 minutes")
	}
	return nil
}

// scanLog reads the keeper's JSON log, sends the keeper's addresses on
// found once both are logged and the service answers ("serving", logged
// once its subscriptions reached the server), nil if the log ends first,
// and passes every line to the test log.
func scanLog(t *testing.T, r io.Reader, found chan<- *runningKeeper) {
	k, sent, serving := &runningKeeper{}, false, false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		t.Log(sc.Text())
		var line struct {
			Msg  string `json:"msg"`
			URL  string `json:"url"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			switch line.Msg {
			case "embedded nats-server started":
				k.natsURL = line.URL
			case "serving metrics and health":
				k.metricsURL = "http://" + line.Addr
			case "serving":
				serving = true
			}
		}
		if !sent && serving && k.natsURL != "" && k.metricsURL != "" {
			found <- k
			sent = true
		}
	}
	if !sent {
		found <- nil
	}
}

// cli runs a nats-keeper command against k's server and returns its output.
func (k *runningKeeper) cli(t *testing.T, wantOK bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), append(args, "--server", k.natsURL)...)
	out, err := cmd.CombinedOutput()
	if (err == nil) != wantOK {
		t.Fatalf("nats-keeper %s: err %v, want ok %v\n%s", strings.Join(args, " "), err, wantOK, out)
	}
	return string(out)
}

// exercise gives the keeper something to count: a kept data with a point,
// an aside a restore made, a verb refused; and, when the binary schedules
// points, a schedule.
func (k *runningKeeper) exercise(t *testing.T) {
	t.Helper()
	nc, err := nats.Connect(k.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "shop_cart"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(t.Context(), "alice", `{"items":2}`); err != nil {
		t.Fatal(err)
	}
	k.cli(t, true, "snapshot-kept", "shop", "cart", "--form", "1", "--before", "aa11")
	k.cli(t, true, "restore-kept", "shop", "cart", "--form", "1", "--before", "aa11", "--why", "helmtest: an aside for the metrics")
	k.cli(t, false, "restore-kept", "shop", "nothing", "--form", "1", "--before", "zz99", "--why", "helmtest: a refused verb")
	if schedules(t) {
		k.cli(t, true, "policy", "set", "shop", "cart", "--every", "1h", "--keep-last", "3")
	}
}

// schedules reports whether this binary takes scheduled points: `policy
// set` takes --every (issue 42).
func schedules(t *testing.T) bool {
	return strings.Contains(helpOf(t, "policy"), "--every")
}

// exported scrapes k's /metrics and returns the name of every sample in it
// (a histogram's _bucket, _sum and _count each).
func (k *runningKeeper) exported(t *testing.T) map[string]bool {
	t.Helper()
	resp, err := http.Get(k.metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
