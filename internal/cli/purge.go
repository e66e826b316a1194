package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/spf13/cobra"
)

func purgeCmd() *cobra.Command {
	var db, consumer string
	var batch int
	c := &cobra.Command{
		Use:   "purge",
		Short: "Remove the inbox identities whose retention ended, in small batches, under the consumer's registered retention",
		Long: `Remove the inbox identities whose retention ended, in small batches (each
its own short transaction, so live traffic is not stalled). Held and
blocked identities are never purged. The consumer's registered policies
are checked first: a retention that does not cover the redelivery window,
or the DLQ retention plus the redrive window, is refused and nothing is
removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				return fmt.Errorf("purge: --db is required: the database the consumer uses")
			}
			if batch < 1 {
				return fmt.Errorf("purge: --batch %d: must be at least 1", batch)
			}
			ctx := cmd.Context()
			st, closeStore, err := openForOperator(ctx, db)
			if err != nil {
				return err
			}
			defer closeStore()
			reg, err := findConsumer(ctx, st, db, consumer)
			if err != nil {
				return err
			}
			pol, err := seqbox.RegisteredPolicies(reg)
			if err != nil {
				return fmt.Errorf("purge: %w; nothing was removed", err)
			}
			if missing := unregisteredWindows(pol); len(missing) > 0 {
				return fmt.Errorf("purge: consumer %q: its registration records no %s (it registered with an older seqbox), so its retention cannot be checked against them; run the consumer once with this seqbox and purge again; nothing was removed",
					reg.Consumer, strings.Join(missing, ", "))
			}
			cfg := seqbox.Config{Name: reg.Consumer, Store: st, Logger: consumerLogger(), Policies: pol,
				Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error {
					return errors.New("purge applies nothing")
				}}
			// NewConsumer validates the registered retention against the
			// registered windows, as docs/design.md §13 says, before anything goes.
			c, err := seqbox.NewConsumer(cfg)
			if err != nil {
				return fmt.Errorf("purge: consumer %q: its registered policies are refused: %w; nothing was removed", reg.Consumer, err)
			}
			n, err := c.Purge(ctx, batch)
			if err != nil {
				return fmt.Errorf("purge: %d removed before: %w", n, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "purged=%d consumer=%s retention=%s\n", n, reg.Consumer, pol.Retention)
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&db, "db", "", "the consumer's database: a SQLite file path or a postgres:// URL (required)")
	fl.StringVar(&consumer, "consumer", "", "the consumer's name (default: the only consumer registered in the database)")
	fl.IntVar(&batch, "batch", seqbox.DefaultPurgeBatch, "identities removed per transaction")
	return c
}

// unregisteredWindows names the windows a registration does not record:
// those the retention is validated against (docs/design.md §13). Defaults in their
// place would check the retention against windows the consumer never had.
func unregisteredWindows(p seqbox.Policies) []string {
	var missing []string
	for _, w := range []struct {
		name string
		v    time.Duration
	}{
		{"retention", p.Retention}, {"redelivery_window", p.RedeliveryWindow},
		{"dlq_retention", p.DLQRetention}, {"redrive_window", p.RedriveWindow},
	} {
		if w.v == 0 {
			missing = append(missing, w.name)
		}
	}
	return missing
}
