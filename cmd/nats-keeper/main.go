// Command nats-keeper keeps restore points of modules' JetStream data and
// restores them: `serve` runs the keeper as a NATS micro service, the client
// commands send it one verb each, and `demo` shows the whole round trip on an
// embedded server.
//
// It is wiring: cobra, one file per command, each with an options struct and
// a runX(ctx, opts) that returns an error, and exit codes mapped in one
// place. It may import every package of this module but the tests'
// helpers; nothing imports it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{
		Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv,
		Terminal: isTerminal(os.Stderr),
	})
	stop()
	os.Exit(code)
}

// env is what the commands get from the process: output, environment, and
// whether stderr is an interactive terminal (for progress).
type env struct {
	Out, Err io.Writer
	Getenv   func(string) string
	Terminal bool
}

// usageError marks an error of the command line itself (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// ranError marks an error returned by a command's run function, so that every
// other error from cobra is known to be a usage error.
type ranError struct{ err error }

func (e *ranError) Error() string { return e.err.Error() }
func (e *ranError) Unwrap() error { return e.err }

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, e env) int {
	root := newRoot(e)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return report(err, e, helpOf(root, args))
}

// helpOf is the command whose --help a usage error of args points at: the
// subcommand args name, else the root.
func helpOf(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil && c != nil {
		return c.CommandPath()
	}
	return root.CommandPath()
}

// report prints err and maps it to the documented exit code, through
// exitCode only, except for guard, which exits with the code of the
// command it ran. A usage error points at help's --help.
func report(err error, e env, help string) int {
	if err == nil {
		return exitOK
	}
	var ran *ranError
	if !errors.As(err, &ran) {
		fmt.Fprintf(e.Err, "nats-keeper: %v\nRun '%s --help' for usage.\n", err, help)
		return exitUsage
	}
	fmt.Fprintf(e.Err, "nats-keeper: %v\n", ran.err)
	var own *guardExit // guard passes on the code of the command it ran
	if errors.As(ran.err, &own) {
		return own.code
	}
	return exitCode(ran.err)
}

// printJSONError writes a failure as the service's error body, for --json.
func printJSONError(w io.Writer, err error) {
	body := verbs.ErrorBody{Error: err.Error(), Code: verbs.Code(err), Busy: errors.Is(err, kept.ErrBusy)}
	var ve *verbs.Error
	if errors.As(err, &ve) {
		body.Code, body.Evidence = ve.Code, ve.Evidence
	}
	b, _ := json.MarshalIndent(body, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

// isTerminal reports whether f is an interactive terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
