package cli

import (
	"errors"
	"net/http"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

func consumersCmd() *cobra.Command {
	return groupCmd("consumers", "List the consumers registered in a database, with their handler, process and heartbeat",
		consumersListCmd())
}

func consumersListCmd() *cobra.Command {
	var f opFlags
	c := &cobra.Command{
		Use:   "list",
		Short: "List the registered consumers by name: handler kind, the process that registered last, its heartbeat, and whether it is live",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.listConsumers(f.out) })
			}
			if f.db == "" {
				return errors.New("--db is required: the database the consumers use (or --server URL)")
			}
			if f.token != "" {
				return errors.New("--admin-token is for --server: the database path needs no token")
			}
			st, closeStore, err := openStoreAccess(cmd.Context(), f.db, store.ReadOnly)
			if err != nil {
				return err
			}
			defer closeStore()
			regs, err := st.Executor().ConsumerList(cmd.Context())
			if err != nil {
				return err
			}
			if f.consumer != "" {
				// One consumer, named: an unknown name is an error that lists
				// the consumers there are, as every other command says it.
				r, err := findConsumer(cmd.Context(), st, f.db, f.consumer)
				if err != nil {
					return err
				}
				regs = []store.Registration{r}
			}
			now := time.Now()
			lines := make([]ops.ConsumerLine, 0, len(regs))
			for _, r := range regs {
				lines = append(lines, ops.ConsumerLineOf(r, now, seqbox.LiveWithin))
			}
			return ops.WriteConsumers(cmd.OutOrStdout(), lines, f.out)
		},
	}
	f.register(c, false)
	return c
}

// listConsumers is consumers list --server: the consumers registered in
// the gateway's database.
func (c *adminClient) listConsumers(out ops.Format) error {
	var res struct {
		Consumers []ops.ConsumerLine `json:"consumers"`
	}
	if err := c.call(http.MethodGet, "/v1/admin/consumers", "", nil, &res, readTimeout, "consumers"); err != nil {
		return err
	}
	return ops.WriteConsumers(c.cmd.OutOrStdout(), res.Consumers, out)
}
