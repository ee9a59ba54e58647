package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// The environment guard gives the command: the point it took.
const (
	envPoint       = "NATS_KEEPER_POINT" // the point's directory in the store, as restore-kept --from takes it
	envModule      = "NATS_KEEPER_MODULE"
	envLocal       = "NATS_KEEPER_LOCAL"
	envForm        = "NATS_KEEPER_FORM"
	envFingerprint = "NATS_KEEPER_FINGERPRINT"
	envCatchUp     = "NATS_KEEPER_CATCH_UP"
	envTaken       = "NATS_KEEPER_POINT_TAKEN" // RFC 3339, UTC
	envStreams     = "NATS_KEEPER_STREAMS"     // the point's streams, separated by commas
	envPrefix      = "NATS_KEEPER_PREFIX"      // the keeper's subject prefix
)

// signalGrace is how long guard waits, when its context ends, for the signal
// that ended it, to pass that one on rather than SIGTERM.
const signalGrace = 200 * time.Millisecond

type guardOptions struct {
	Client            clientFlags
	Out               output
	Module            string
	Local             string
	Form              int
	Before            string
	CatchUp           string
	KeepFor           kept.Duration
	NoRestoreOnSignal bool
	Method            string    // the restore's method, when the command fails
	Leave             string    // the restore's downstream
	At                string    // the restore's moment (RFC 3339), instead of the point taken
	Command           []string  // the command and its arguments
	Environ           []string  // the command's environment, before the point's details are added
	Stdin             io.Reader // the command's standard input
}

func newGuardCmd(e env) *cobra.Command {
	o := &guardOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "guard MODULE LOCAL --form N --before FINGERPRINT [--catch-up TOOL] [--method M] [--downstream leave] [--at TIME] -- COMMAND [ARGS...]",
		Short: "Run a migration wrapped in a restore point, restored if it fails",
		Long: `Take the restore point of one kept data, then run COMMAND with the point's
details in its environment (` + envPoint + `, ` + envModule + `, ` + envLocal + `,
` + envForm + `, ` + envFingerprint + `, ` + envCatchUp + `, ` + envTaken + `,
` + envStreams + `, ` + envPrefix + `).

If the snapshot fails, COMMAND does not run. If COMMAND exits non-zero or is
killed, guard restores the point (why "guard: COMMAND exited N"), setting the
data COMMAND left aside, and prints the aside's id and the catch-up tool.
guard exits with COMMAND's own code (128+N when killed by signal N); with the
codes of nats-keeper --help only when COMMAND did not run.

With --at TIME (RFC 3339) guard restores, when COMMAND fails, the kept data
as it was at that moment, from its capture (see capture), instead of the
point it took (which it still takes); the moment must be in the captured
window by then.

SIGINT or SIGTERM while COMMAND runs is passed to COMMAND (which runs in a
process group of its own); when it then fails, guard restores, unless
--no-restore-on-signal. With --json, COMMAND's standard output goes to
standard error, and guard prints its outcome as JSON.`,
		Args: func(cmd *cobra.Command, a []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 2 || len(a) < 3 {
				return &usageError{errors.New("guard takes MODULE LOCAL, then -- and the command to run")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local, o.Command = a[0], a[1], a[2:]
			o.Environ, o.Stdin = os.Environ(), os.Stdin
			return ran(runGuard(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	addPointFlags(cmd, &o.Form, &o.Before, &o.CatchUp, &o.KeepFor)
	f.BoolVar(&o.NoRestoreOnSignal, "no-restore-on-signal", false,
		"when the command fails after guard passed it a SIGINT or SIGTERM, do not restore the point")
	f.StringVar(&o.Method, "method", "", "how the restore rolls each stream back when the command fails: auto (the default), full, delta or logical")
	f.StringVar(&o.Leave, "downstream", "", `"leave": when restoring, restore whole a stream that others mirror or source`)
	f.StringVar(&o.At, "at", "", "when the command fails, restore the kept data as it was at this moment (RFC 3339), from its capture, instead of the point taken")
	return cmd
}

// commandEnded is how the guarded command ended when it did not exit 0.
type commandEnded struct {
	name   string
	code   int            // its exit code, when it exited
	signal syscall.Signal // the signal that killed it, when one did
}

func (e *commandEnded) Error() string {
	if e.signal != 0 {
		return fmt.Sprintf("%s was killed by %s", e.name, unix.SignalName(e.signal))
	}
	return fmt.Sprintf("%s exited %d", e.name, e.code)
}

// exitCode is guard's exit code: the command's own, 128+N for signal N.
func (e *commandEnded) exitCode() int {
	if e.signal != 0 {
		return 128 + int(e.signal)
	}
	return e.code
}

// guardJSON is guard's --json output.
type guardJSON struct {
	verbs.GuardResult
	Command  []string `json:"command"`
	ExitCode int      `json:"exit-code" was:"exit_code"`
	Signal   string   `json:"signal,omitempty"`
}

// guardWire is guardJSON without methods: its JSON carries the old keys of
// its fields and of verbs.GuardResult's beside the new (kept.MarshalWire).
type guardWire guardJSON

func (g guardJSON) MarshalJSON() ([]byte, error)  { return kept.MarshalWire((*guardWire)(&g)) }
func (g *guardJSON) UnmarshalJSON(b []byte) error { return kept.UnmarshalWire(b, (*guardWire)(g)) }

func runGuard(ctx context.Context, o guardOptions) error {
	if len(o.Command) == 0 {
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "guard was given no command, so nothing was done"))
	}
	if _, err := exec.LookPath(o.Command[0]); err != nil {
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "the command %q cannot be run (%v), so no point was taken and nothing was done", o.Command[0], err))
	}
	nc, err := connectClient(ctx, o.Client, o.Out, "nats-keeper guard")
	if err != nil {
		return jsonErr(o.Client, o.Out, err)
	}
	defer nc.Close()
	c := verbs.NewClient(nc, verbs.WithPrefix(o.Client.Prefix), verbs.WithTimeout(o.Client.Timeout),
		verbs.WithRecoveryWait(o.Client.RecoveryWait))

	// A signal guard gets while the command runs cancels the change's
	// context, so Guard knows the change was cut short.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var ended *commandEnded
	req := verbs.GuardRequest{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before, CatchUp: o.CatchUp,
		KeepFor: o.KeepFor, Caller: o.Client.Caller, NoRestoreOnCancel: o.NoRestoreOnSignal, Method: o.Method, Downstream: o.Leave, At: o.At}
	res, gerr := c.Guard(ctx, req, func(ctx context.Context) error {
		err := runCommand(ctx, o, c.Prefix(), verbs.GuardPoint(ctx), sigs, cancel)
		errors.As(err, &ended)
		return err
	})
	if !res.Ran {
		return jsonErr(o.Client, o.Out, gerr)
	}
	if o.Client.JSON {
		out := guardJSON{GuardResult: res, Command: o.Command}
		if ended != nil {
			out.ExitCode = ended.exitCode()
			if ended.signal != 0 {
				out.Signal = unix.SignalName(ended.signal)
			}
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out.Out, "%s\n", b)
	} else {
		printGuard(o.Out.Out, res)
	}
	switch {
	case gerr == nil:
		return nil
	case ended != nil:
		return &guardExit{err: gerr, code: ended.exitCode()}
	}
	return gerr // the command could not be started or waited for
}

// guardExit is guard's error when the command ran and failed: guard exits
// with the command's code, not one of its own.
type guardExit struct {
	err  error
	code int
}

func (e *guardExit) Error() string { return e.err.Error() }
func (e *guardExit) Unwrap() error { return e.err }

// printGuard prints what guard did, for a person.
func printGuard(w io.Writer, res verbs.GuardResult) {
	fmt.Fprintln(w, res.Said)
	if p := res.Point; p != nil {
		fmt.Fprintf(w, "  point:     %s.%s form %d before %s, taken %s (%s)\n", p.Module, p.Local, p.Form, p.Fingerprint,
			p.Taken.UTC().Format("2006-01-02 15:04:05Z"), p.Dir)
	}
	switch {
	case res.Restored != nil:
		fmt.Fprintf(w, "  restored:  %s\n", res.Restored.Said)
	case res.RestoreError != "":
		fmt.Fprintf(w, "  restore:   FAILED: %s\n", res.RestoreError)
	case res.Failed != "":
		fmt.Fprintln(w, "  restore:   not done")
	}
	if res.Aside != "" {
		fmt.Fprintf(w, "  aside:     %s\n", res.Aside)
	}
	if res.CatchUp != "" {
		fmt.Fprintf(w, "  catch-up:  run %s next\n", res.CatchUp)
	}
}

// runCommand runs the guarded command with the point's details in its
// environment, in a process group of its own, and waits for it. A SIGINT or
// SIGTERM on sigs is passed to the group, and cancels the change's context
// (through cancel); so is SIGTERM when ctx ends otherwise. It returns nil
// when the command exits 0, a *commandEnded when it exits non-zero or is
// killed.
func runCommand(ctx context.Context, o guardOptions, prefix string, p *kept.Point, sigs <-chan os.Signal, cancel context.CancelFunc) error {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = guardEnv(o.Environ, prefix, p)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Out.Out, o.Out.Err
	if o.Client.JSON {
		cmd.Stdout = o.Out.Err // standard output holds only guard's JSON
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return kept.Errorf(kept.ErrFailed, "the command %s could not be started: %w", o.Command[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	passed := false
	pass := func(s os.Signal) {
		passed = true
		cancel()
		_ = syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
	}
	done := ctx.Done()
	var err error
wait:
	for {
		select {
		case s := <-sigs:
			pass(s)
		case <-done:
			done = nil
			if passed { // ctx ended because guard passed a signal on
				continue
			}
			select { // the signal that ended ctx, if one did, is passed on as itself
			case s := <-sigs:
				pass(s)
			case <-time.After(signalGrace):
				pass(syscall.SIGTERM)
			case err = <-waited:
				break wait
			}
		case err = <-waited:
			break wait
		}
	}
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return kept.Errorf(kept.ErrFailed, "waiting for the command %s failed: %w", o.Command[0], err)
	}
	ended := &commandEnded{name: o.Command[0], code: ee.ExitCode()}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ended.signal = ws.Signal()
	}
	return ended
}

// guardEnv is environ without any of guard's own variables, then the
// point's details.
func guardEnv(environ []string, prefix string, p *kept.Point) []string {
	own := []string{envPoint, envModule, envLocal, envForm, envFingerprint, envCatchUp, envTaken, envStreams, envPrefix}
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(own, name) {
			env = append(env, kv)
		}
	}
	streams := make([]string, 0, len(p.Streams))
	for _, s := range p.Streams {
		streams = append(streams, s.Name)
	}
	return append(env,
		envPoint+"="+p.Dir,
		envModule+"="+p.Module,
		envLocal+"="+p.Local,
		envForm+"="+strconv.Itoa(p.Form),
		envFingerprint+"="+p.Fingerprint,
		envCatchUp+"="+p.CatchUp,
		envTaken+"="+p.Taken.UTC().Format(time.RFC3339Nano),
		envStreams+"="+strings.Join(streams, ","),
		envPrefix+"="+prefix,
	)
}
