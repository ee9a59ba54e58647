package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// profiler records CPU profiles of running processes with Linux perf, when
// Config.Perf names a directory; otherwise it does nothing.
type profiler struct {
	dir  string
	done map[string]bool // one profile per operation name
}

// recording is one perf record in progress.
type recording struct {
	cmd  *exec.Cmd
	data string
}

// start records the processes pids until stop, once per name. When perf
// cannot be started the operation runs unprofiled and log says so.
func (p *profiler) start(name string, log *slog.Logger, pids ...int) *recording {
	if p == nil || p.dir == "" || p.done[name] {
		return nil
	}
	p.done[name] = true
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		log.Warn("the profiles' directory could not be made, so this operation is not profiled", "operation", name, "err", err)
		return nil
	}
	var ids []string
	for _, pid := range pids {
		ids = append(ids, strconv.Itoa(pid))
	}
	data := filepath.Join(p.dir, name+".perf.data")
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-o", data, "-p", strings.Join(ids, ","))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		log.Warn("perf could not be started, so this operation is not profiled", "operation", name, "err", err)
		return nil
	}
	time.Sleep(300 * time.Millisecond) // perf attaches
	return &recording{cmd: cmd, data: data}
}

// stop ends the recording and writes its report (CPU by process, then by
// function, callers not included) beside it as <name>.txt.
func (r *recording) stop(ctx context.Context) error {
	if r == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	_ = r.cmd.Wait()
	out, err := exec.CommandContext(ctx, "perf", "report", "-i", r.data, "--stdio", "--no-children",
		"--sort", "comm,sym", "--percent-limit", "0.7", "-g", "none").CombinedOutput()
	if err != nil {
		return fmt.Errorf("perf report %s: %w\n%s", r.data, err, out)
	}
	txt := strings.TrimSuffix(r.data, ".perf.data") + ".txt"
	return os.WriteFile(txt, out, 0o644)
}
