// Package cli is the command tree of the seqbox binaries: the reliability
// layer in front of a message consumer's side effects (a transactional
// inbox, ordering per business object) and the operator tools around them.
// cmd/seqbox runs it as it is; cmd/seqbox-lab adds the in-process brokers
// that `chaos` starts when it is given no --broker (see Edition).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/spf13/cobra"
)

// Edition is what sets one seqbox binary apart from another.
type Edition struct {
	// Name is the binary's name, in usage, errors and the version line.
	Name string
	// StartBroker, when set, starts the broker a `chaos --transport`
	// run consumes from when no --broker is given (seqbox-lab's
	// in-process emulators). Nil: a broker transport needs --broker.
	StartBroker chaos.BrokerStarter
	// WorkerTransports open the transports a chaos worker of this binary
	// consumes from beyond the harness's own (seqbox-lab's pubsub).
	WorkerTransports map[string]chaos.WorkerTransport
}

// Main runs the command line of ed's binary and exits: 0 on success, 2
// on an error (printed on one line after the binary's name), or the code
// a command chose after saying why.
func Main(ed Edition) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := rootCmd(ed)
	if err := root.ExecuteContext(ctx); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code)) // the output already said why
		}
		fmt.Fprintln(os.Stderr, ed.Name+": "+oneLine(err.Error()))
		os.Exit(2)
	}
}

// oneLine is s on one line: its lines, trimmed, joined by a space (an
// error whose cause is on a line of its own keeps its cause).
func oneLine(s string) string {
	var parts []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, " ")
}

func rootCmd(ed Edition) *cobra.Command {
	root := &cobra.Command{
		Use:           ed.Name,
		Short:         "Exactly-once effects and per-object ordering for at-least-once consumers",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate(ed.Name + " {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if !c.HasParent() { // main prefixes the program's name once
			return fmt.Errorf("%w (see %s --help)", err, ed.Name)
		}
		path := strings.TrimPrefix(c.CommandPath(), ed.Name+" ")
		return fmt.Errorf("%s: %w (see %s %s --help)", path, err, ed.Name, path)
	})
	root.AddCommand(demoCmd(), replayCmd(), dlqCmd(), keysCmd(), inboxCmd(), collisionsCmd(), chaosCmd(ed), benchCmd(), serveCmd(), effectsCmd(), consumersCmd(), purgeCmd(), modelCmd(), versionCmd(ed.Name))
	return root
}
