// Command seqbox is the reliability layer in front of a message consumer's
// side effects: a transactional inbox, ordering per business object, and the
// operator tools around them. See `seqbox help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := rootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code)) // the output already said why
		}
		fmt.Fprintln(os.Stderr, "seqbox: "+oneLine(err.Error()))
		os.Exit(2)
	}
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "seqbox",
		Short:         "Exactly-once effects and per-object ordering for at-least-once consumers",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("seqbox {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		path := strings.TrimPrefix(c.CommandPath(), "seqbox ")
		return fmt.Errorf("%s: %w (see seqbox %s --help)", path, err, path)
	})
	root.AddCommand(demoCmd(), replayCmd(), dlqCmd(), keysCmd(), chaosCmd(), benchCmd(), serveCmd(), effectsCmd(), purgeCmd(), modelCmd(), versionCmd())
	return root
}
