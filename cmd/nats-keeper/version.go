package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

// buildVersion is the module version the binary was built at, from the build
// information ("(devel)" when built without one).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	return bi.Main.Version
}

type versionOptions struct {
	Out io.Writer
}

func newVersionCmd(e env) *cobra.Command {
	o := versionOptions{Out: e.Out}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  args(0, 0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return ran(runVersion(cmd.Context(), o)) },
	}
}

func runVersion(_ context.Context, o versionOptions) error {
	_, err := fmt.Fprintf(o.Out, "nats-keeper %s (%s, embedded nats-server %s)\n", buildVersion(), runtime.Version(), server.VERSION)
	return err
}
