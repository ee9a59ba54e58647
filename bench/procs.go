package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times
// (100 on every Linux Go supports).
const clockTicks = 100

// lockedBuffer is a bounded log a child process writes while the run reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

const maxProcLog = 1 << 20

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxProcLog - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a long-running child process: the server or the keeper.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited closes
	log    *lockedBuffer
}

func startProc(name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{}), log: &lockedBuffer{}}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to limit, then kills.
func (p *proc) stop(limit time.Duration) error {
	if !p.running() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.name, limit)
	}
}

// tail is the end of the process's log, for error messages.
func (p *proc) tail() string {
	s := p.log.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// timed is the cost of one command run to its end.
type timed struct {
	wall    time.Duration
	cpu     time.Duration // user + system of the process
	sys     time.Duration // system of the process
	peakRSS int64         // bytes
	out     string
}

// runTimed runs a command to its end and measures its wall time, CPU time
// and peak RSS (from wait4's rusage).
func runTimed(ctx context.Context, env []string, bin string, args ...string) (timed, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t := timed{wall: time.Since(start), out: out.String()}
	if ps := cmd.ProcessState; ps != nil {
		t.cpu, t.sys = ps.UserTime()+ps.SystemTime(), ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			t.peakRSS = ru.Maxrss << 10 // KiB on Linux
		}
	}
	if err != nil {
		return t, fmt.Errorf("%s %s failed: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, t.out)
	}
	return t, nil
}

// cpuTime is the CPU time a process has used: in all, and in the kernel.
type cpuTime struct{ all, sys time.Duration }

func (c cpuTime) sub(d cpuTime) cpuTime { return cpuTime{c.all - d.all, c.sys - d.sys} }

// procCPU is the user + system CPU time a running process has used.
func procCPU(pid int) (cpuTime, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return cpuTime{}, fmt.Errorf("/proc/%d/stat has no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // utime and stime are fields 14 and 15, here 11 and 12 (0-based)
		return cpuTime{}, fmt.Errorf("/proc/%d/stat is too short", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return cpuTime{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return cpuTime{all: time.Duration(u+s) * time.Second / clockTicks, sys: time.Duration(s) * time.Second / clockTicks}, nil
}

// cpuOf is procCPU of each of pids, in order.
func cpuOf(pids []int) ([]cpuTime, error) {
	out := make([]cpuTime, len(pids))
	for i, pid := range pids {
		c, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// sumCPU is the CPU used from before to after, summed over the processes.
func sumCPU(before, after []cpuTime) cpuTime {
	var s cpuTime
	for i := range min(len(before), len(after)) {
		d := after[i].sub(before[i])
		s.all, s.sys = s.all+d.all, s.sys+d.sys
	}
	return s
}

// peakRSS is a running process's peak resident set (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM") }

// statusBytes is a field in kB of /proc/<pid>/status (VmHWM, VmRSS), in bytes.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the memory of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc/%d/status: %s reads %q", pid, field, v)
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, field, err)
			}
			return n << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// resetPeakRSS sets a process's VmHWM back to its current RSS (Linux 4.0 and
// later), so the next peakRSS is the peak of what follows.
func resetPeakRSS(pid int) error {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/clear_refs", pid), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("reset the peak RSS of process %d: %w", pid, err)
	}
	_, err = f.WriteString("5")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("reset the peak RSS of process %d: %w", pid, err)
	}
	return nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is the environment of the child processes: the caller's, without
// NATS_ and AWS_ settings and with HOME in the run's directory, so no `nats`
// context or AWS profile of the user is used or changed.
func cleanEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_") || strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
}
