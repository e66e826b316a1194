package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the module version and the VCS revision the binary was built
// from: v1.2.3, or devel-<revision> (with +dirty for uncommitted changes)
// for a build of a checkout.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && v == "devel" {
		v += "-" + rev[:min(len(rev), 12)]
	}
	if dirty {
		v += "+dirty"
	}
	return v
}

func versionCmd(name string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print " + name + "'s version (module version and VCS revision)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", name, version())
			return err
		},
	}
}
