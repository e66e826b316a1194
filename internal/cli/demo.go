package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox/internal/demo"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/spf13/cobra"
)

// scenarios are the labs `seqbox demo --scenario` runs.
var scenarios = []string{"inbox", "external-call", "agent-decision", "outbox"}

func demoCmd() *cobra.Command {
	var db, scenario string
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run a lab: inbox (2 messages, each delivered twice after a crash before ACK), external-call, agent-decision, outbox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				tmp, err := os.MkdirTemp("", "seqbox-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				db = filepath.Join(tmp, sqlite.DefaultPath)
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			self, err := os.Executable()
			if err != nil {
				return err
			}
			switch scenario {
			case "inbox":
				_, err = demo.Run(ctx, db, out)
			case "external-call":
				_, err = demo.RunExternal(ctx, self, db, 10, out)
			case "agent-decision":
				_, err = demo.RunAgent(ctx, self, db, out)
			case "outbox":
				_, err = demo.RunOutbox(ctx, self, db, out)
			default:
				return fmt.Errorf("demo: --scenario %q: not one of %v", scenario, scenarios)
			}
			return err
		},
	}
	c.Flags().StringVar(&db, "db", "", "SQLite file or postgres:// URL, empty or seqbox's and without an earlier demo run; the demo's consumer joins any other there (default: a temporary SQLite file)")
	c.Flags().StringVar(&scenario, "scenario", "inbox", fmt.Sprintf("the lab to run: %v", scenarios))
	c.AddCommand(demoWorkerCmd())
	return c
}

func demoWorkerCmd() *cobra.Command {
	var db, scenario, api, role string
	c := &cobra.Command{
		Use:    "worker",
		Short:  "One worker process of a demo lab (started by seqbox demo)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch scenario {
			case "external-call":
				return demo.RunExternalWorker(cmd.Context(), db, api, cmd.OutOrStdout())
			case "outbox":
				return demo.RunOutboxWorker(cmd.Context(), db, role, cmd.OutOrStdout())
			case "agent-decision":
				return demo.RunAgentWorker(cmd.Context(), db, api, os.Getenv("SEQBOX_DEMO_REDRIVE") != "", cmd.OutOrStdout())
			}
			return fmt.Errorf("demo worker: --scenario %q has no worker", scenario)
		},
	}
	c.Flags().StringVar(&db, "db", "", "the lab's database: a SQLite file path or a postgres:// URL")
	c.Flags().StringVar(&scenario, "scenario", "", "the lab")
	c.Flags().StringVar(&api, "api", "", "the remote API's URL")
	c.Flags().StringVar(&role, "role", "", "the process's part in the lab")
	return c
}
