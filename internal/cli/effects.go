package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

func effectsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "effects",
		Short: "The ledger of external calls: list them, resolve an uncertain one by hand",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(effectsListCmd(), effectsResolveCmd())
	return c
}

func effectsListCmd() *cobra.Command {
	var db, consumer, action, state string
	var asJSON bool
	var limit int
	c := &cobra.Command{
		Use:   "list",
		Short: "List ledger rows, oldest change first (--state uncertain: what waits for reconciliation)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				return fmt.Errorf("effects list: --db is required")
			}
			st, err := dbopen.StoreAccess(cmd.Context(), db, store.ReadOnly)
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := effects.New(st, effects.Config{})
			if err != nil {
				return err
			}
			rows, err := l.List(cmd.Context(), effects.Filter{Consumer: consumer, Action: action, State: effects.State(state), Limit: limit})
			if err != nil {
				return fmt.Errorf("effects list: %w", err)
			}
			return writeEffects(cmd.OutOrStdout(), rows, asJSON, time.Now())
		},
	}
	fl := c.Flags()
	fl.StringVar(&db, "db", "", "the database: a SQLite file path or a postgres:// URL (required)")
	fl.StringVar(&consumer, "consumer", "", "only this consumer's calls")
	fl.StringVar(&action, "action", "", "only this action")
	fl.StringVar(&state, "state", "", "only this state: pending, succeeded, failed or uncertain")
	fl.IntVar(&limit, "limit", 100, "at most this many rows")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object per line instead of text")
	return c
}

// writeEffects prints ledger rows as a table or JSON lines.
func writeEffects(w io.Writer, rows []effects.Effect, asJSON bool, now time.Time) error {
	if asJSON {
		enc := ops.NewJSONEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no external calls recorded")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IDEMPOTENCY KEY\tCONSUMER\tMESSAGE\tACTION\tSTATE\tREF\tCALLS\tSINCE\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.IdempotencyKey, ops.Visible(r.Consumer),
			ops.Visible(r.Source+"/"+r.ID), ops.Visible(r.Action), r.State, ops.Visible(r.Ref), r.Calls,
			now.Sub(r.UpdatedAt).Round(time.Second), ops.Visible(oneLine(r.LastError)))
	}
	return tw.Flush()
}

func effectsResolveCmd() *cobra.Command {
	var db, state, ref, by, reason string
	c := &cobra.Command{
		Use:   "resolve IDEMPOTENCY-KEY",
		Short: "Settle an uncertain call after checking the remote side: --state succeeded --ref R, or --state failed (the next attempt calls again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if db == "" {
				return fmt.Errorf("effects resolve: --db is required")
			}
			to := effects.State(state)
			if to != effects.Succeeded && to != effects.Failed {
				return fmt.Errorf("effects resolve: --state %q: succeeded or failed", state)
			}
			if to == effects.Succeeded && strings.TrimSpace(ref) == "" {
				return fmt.Errorf("effects resolve: --state succeeded needs --ref, the remote side's reference of the effect")
			}
			if blank(by) || blank(reason) {
				return fmt.Errorf("effects resolve: --by and --reason are required: the resolution must be attributable")
			}
			st, err := dbopen.StoreAccess(cmd.Context(), db, store.Adopt)
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := effects.New(st, effects.Config{})
			if err != nil {
				return err
			}
			if err := l.Resolve(cmd.Context(), args[0], to, ref, by, reason); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s resolved %s by %s\n", args[0], to, by)
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&db, "db", "", "the database: a SQLite file path or a postgres:// URL (required)")
	fl.StringVar(&state, "state", "", "succeeded or failed (required)")
	fl.StringVar(&ref, "ref", "", "the remote reference, with --state succeeded")
	fl.StringVar(&by, "by", "", "who resolves it (required)")
	fl.StringVar(&reason, "reason", "", "what was checked (required)")
	return c
}
