package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

const exitCodesHelp = `Exit codes:
  0  done
  1  failed
  2  bad usage or bad request (nothing was done)
  3  not found
  4  busy or conflict (another verb holds the kept data)
  5  no service or bus reachable
  6  denied by the NATS server's permissions (nothing was done)
  7  locked: the archive is encrypted and the keeper has no identity that decrypts it (nothing was touched)
  8  cut short: the keeper that ran the verb stopped answering, and no keeper had finished or undone it
     within --recovery-wait; recovery will (see list-kept and acts)`

func newRoot(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "nats-keeper",
		Short: "Keep restore points of modules' JetStream data, and restore them",
		Long: `nats-keeper takes restore points of a module's kept data on a NATS JetStream bus
(its KV bucket, object store and stream, and its consumers' positions) before a
change, and restores them beside the live data, setting the live data aside.

Start here: nats-keeper demo

` + exitCodesHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(e.Out)
	root.SetErr(e.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		newServeCmd(e), newSnapshotCmd(e), newRestoreCmd(e), newDiscardCmd(e), newDiscardPointCmd(e),
		newListCmd(e), newVerifyCmd(e), newDiffCmd(e), newCaptureCmd(e), newPruneCmd(e), newPolicyCmd(e), newPlanCmd(e), newActsCmd(e), newEvidenceCmd(e), newCopyCmd(e), newExportCmd(e), newImportCmd(e), newGuardCmd(e), newDemoCmd(e), newVersionCmd(e),
	)
	return root
}

// ran wraps a run function's error so that main knows it is not a usage error.
func ran(err error) error {
	if err == nil {
		return nil
	}
	return &ranError{err}
}

// connFlags are the NATS connection flags every command shares.
type connFlags struct {
	Server  string
	Creds   string
	NKey    string
	TLSCert string
	TLSKey  string
	TLSCA   string
	Context string
	envURL  string // $NATS_URL, --server's default: a --context wins over it
	// JSDomain is --js-domain, on the commands that reach JetStream
	// themselves (addDomainFlag); "" takes the context's domain, if any.
	JSDomain string
}

// addDomainFlag adds --js-domain, on the commands that reach JetStream
// themselves (serve, policy, import, acts); the others only send verbs to
// a keeper, which has its own.
func addDomainFlag(fs *pflag.FlagSet, c *connFlags) {
	fs.StringVar(&c.JSDomain, "js-domain", "", "the JetStream domain the kept data, the index and the acts are in, such as a leafnode's (default: the --context's domain, else the connected server's own)")
}

// domain is the JetStream domain to reach: --js-domain, else the context's.
func (c connFlags) domain() (string, error) {
	if c.JSDomain != "" || c.Context == "" {
		return c.JSDomain, nil
	}
	d, err := jsbus.ContextDomain(c.Context)
	if err != nil {
		return "", kept.Errorf(kept.ErrBadRequest, "%w, so nothing was done", err)
	}
	return d, nil
}

func addConnFlags(fs *pflag.FlagSet, c *connFlags, e env) {
	c.envURL = e.Getenv("NATS_URL")
	fs.StringVar(&c.Server, "server", c.envURL, "NATS server URL(s) (default $NATS_URL; not with --context, which wins over $NATS_URL)")
	fs.StringVar(&c.Creds, "creds", "", "user credentials file")
	fs.StringVar(&c.NKey, "nkey", "", "user NKey seed file")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "TLS client certificate file")
	fs.StringVar(&c.TLSKey, "tls-key", "", "TLS client key file")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "TLS certificate authority file")
	fs.StringVar(&c.Context, "context", "", "the name of a nats CLI context to connect with")
}

// clientFlags are the flags of the commands that send one verb.
type clientFlags struct {
	Conn         connFlags
	Prefix       string
	Timeout      time.Duration
	RecoveryWait time.Duration
	JSON         bool
	Caller       string
}

func addClientFlags(fs *pflag.FlagSet, c *clientFlags, e env) {
	addConnFlags(fs, &c.Conn, e)
	fs.StringVar(&c.Prefix, "prefix", verbs.DefaultPrefix, "subject prefix of the keeper's verbs")
	fs.DurationVar(&c.Timeout, "timeout", verbs.DefaultTimeout, "how long to wait for the reply")
	fs.DurationVar(&c.RecoveryWait, "recovery-wait", verbs.DefaultRecoveryWait,
		"when the keeper running the verb stops answering, how long to follow the recovery for its outcome before exiting 8 (cut short)")
	fs.BoolVar(&c.JSON, "json", false, "print the reply as JSON")
	fs.StringVar(&c.Caller, "caller", defaultCaller(e), "who is asking, recorded with the act")
}

func defaultCaller(e env) string {
	user := e.Getenv("USER")
	if user == "" {
		user = "someone"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return user
	}
	return user + "@" + host
}

// args checks positional arguments, as a usage error.
// optionalKept sets module and local from the arguments [MODULE [LOCAL]].
func optionalKept(a []string, module, local *string) {
	if len(a) > 0 {
		*module = a[0]
	}
	if len(a) > 1 {
		*local = a[1]
	}
}

func args(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) >= min && len(a) <= max {
			return nil
		}
		got := fmt.Sprintf("got %d", len(a))
		if len(a) > 0 {
			got += ": " + strings.Join(a, " ")
		}
		names := argNames(cmd.Use)
		switch {
		case max == 0:
			return &usageError{fmt.Errorf("%s takes no arguments, only flags; %s", cmd.Name(), got)}
		case min == max:
			return &usageError{fmt.Errorf("%s takes %s (%d argument(s)), %s", cmd.Name(), names, min, got)}
		}
		return &usageError{fmt.Errorf("%s takes %s (%d to %d arguments), %s", cmd.Name(), names, min, max, got)}
	}
}

// argNames are the positional arguments a command's Use line names: the
// words after its name, up to the first flag or alternative.
func argNames(use string) string {
	var names []string
	for _, w := range strings.Fields(use)[1:] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[-") || w == "|" {
			break
		}
		names = append(names, w)
	}
	return strings.Join(names, " ")
}
