package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

func effectsCmd() *cobra.Command {
	return groupCmd("effects", "The ledger of external calls: list them, resolve an uncertain one by hand",
		effectsListCmd(), effectsResolveCmd())
}

// ledger opens --db (with open: read-only for a listing, openForOperator
// for a write), selects the consumer as every operator command does, and
// runs fn with the consumer's ledger.
func (f *opFlags) ledger(ctx context.Context, open func(context.Context, string) (store.Store, func(), error), fn func(l *effects.Ledger, consumer string) error) error {
	if f.token != "" {
		return fmt.Errorf("--admin-token is for --server: the database path needs no token")
	}
	if f.db == "" {
		return fmt.Errorf("--db is required: the database the consumer uses (or --server, a running seqbox serve)")
	}
	st, closeStore, err := open(ctx, f.db)
	if err != nil {
		return err
	}
	defer closeStore()
	l, err := effects.New(st, effects.Config{})
	if err != nil {
		return err
	}
	consumer, err := ledgerConsumer(ctx, st, l, f.db, f.consumer)
	if err != nil {
		return err
	}
	return fn(l, consumer)
}

// ledgerConsumer is the consumer --consumer names, or the only one
// registered in the database. A ledger may be used on its own
// (effects.Ledger.DoFor) by a consumer that never registered: --consumer
// takes it too when the ledger has calls of it.
func ledgerConsumer(ctx context.Context, st store.Store, l *effects.Ledger, db, name string) (string, error) {
	reg, err := findConsumer(ctx, st, db, name)
	if err == nil {
		return reg.Consumer, nil
	}
	if name == "" {
		return "", fmt.Errorf("%w; --consumer names a consumer of the ledger that never registered", err)
	}
	rows, lerr := l.List(ctx, effects.Filter{Consumer: name, Limit: 1})
	if lerr != nil {
		return "", lerr
	}
	switch {
	case len(rows) > 0:
		return name, nil
	case strings.HasPrefix(err.Error(), "--consumer"):
		return "", err
	}
	return "", fmt.Errorf("--consumer %q: %w", name, err)
}

func effectsListCmd() *cobra.Command {
	var f opFlags
	var action, state string
	var limit int
	c := &cobra.Command{
		Use:   "list",
		Short: "List the consumer's external calls, oldest change first (--state uncertain: what waits for reconciliation)",
		Long: `List the consumer's external calls through the effects ledger, oldest change
first: each call's idempotency key, message, action, state (pending,
succeeded, failed, uncertain), reference, and CALLS, the times the ledger
made the call under its key (each time the row turned pending). A
reconciliation's own request is not counted there: the gateway reconciles
an uncertain call by sending it again under the same Idempotency-Key,
which the agent deduplicates, so the agent may see more requests for a key
than CALLS says. --state uncertain lists what waits for reconciliation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return fmt.Errorf("effects list: --limit %d: at least 1", limit)
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.listEffects(action, state, limit, f.out) })
			}
			return f.ledger(cmd.Context(), openReadOnly, func(l *effects.Ledger, consumer string) error {
				rows, err := l.List(cmd.Context(), effects.Filter{Consumer: consumer, Action: action, State: effects.State(state), Limit: limit + 1})
				if err != nil {
					return fmt.Errorf("effects list: %w", err)
				}
				more := len(rows) > limit
				if more {
					rows = rows[:limit]
				}
				return writeEffects(cmd, rows, more, f.out)
			})
		},
	}
	f.register(c, true)
	fl := c.Flags()
	fl.StringVar(&action, "action", "", "only this action")
	fl.StringVar(&state, "state", "", "only this state: pending, succeeded, failed or uncertain")
	fl.IntVar(&limit, "limit", 100, "at most this many rows")
	return c
}

// writeEffects prints ledger rows as a table or JSON, and says on
// standard error when more matched than --limit let through (more).
func writeEffects(cmd *cobra.Command, rows []effects.Effect, more bool, out ops.Format) error {
	if more {
		shown := fmt.Sprintf("the %d oldest changes", len(rows))
		if len(rows) == 1 {
			shown = "the oldest change"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "seqbox: effects list: %s shown; more match (raise --limit, or narrow with --state or --action)\n", shown)
	}
	return writeEffectRows(cmd.OutOrStdout(), rows, out, time.Now())
}

// writeEffectRows prints ledger rows as a table or JSON.
func writeEffectRows(w io.Writer, rows []effects.Effect, out ops.Format, now time.Time) error {
	if out.Structured() {
		return ops.WriteRows(w, out, rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no external calls recorded")
		return err
	}
	tw := ops.NewTabbed(w, 0, 4, 2)
	fmt.Fprintln(tw, "IDEMPOTENCY KEY\tCONSUMER\tMESSAGE\tACTION\tSTATE\tREF\tCALLS\tSINCE\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.IdempotencyKey, ops.Visible(r.Consumer),
			ops.Visible(r.Source+"/"+r.ID), ops.Visible(r.Action), r.State, ops.Visible(r.Ref), r.Calls,
			now.Sub(r.UpdatedAt).Round(time.Second), ops.Visible(oneLine(r.LastError)))
	}
	return tw.Flush()
}

func effectsResolveCmd() *cobra.Command {
	var f opFlags
	var state, ref, by, reason string
	c := &cobra.Command{
		Use:   "resolve IDEMPOTENCY-KEY",
		Short: "Settle the consumer's uncertain call after checking the remote side: --state succeeded --ref R, or --state failed (the next attempt calls again)",
		Args:  oneArg("IDEMPOTENCY-KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			res := ops.Resolution{State: effects.State(state), Ref: ref, By: by, Reason: reason}
			if err := res.Check(); err != nil {
				return fmt.Errorf("effects resolve: %w", err)
			}
			key := args[0]
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.resolveEffect(key, res, f.out) })
			}
			return f.ledger(cmd.Context(), openForOperator, func(l *effects.Ledger, consumer string) error {
				if err := ops.ResolveEffect(cmd.Context(), l, consumer, key, res); err != nil {
					return fmt.Errorf("effects resolve: %w", err)
				}
				return resolved(cmd.OutOrStdout(), f.out, serve.EffectResolved{IdempotencyKey: key, Resolution: res})
			})
		},
	}
	f.register(c, false)
	fl := c.Flags()
	fl.StringVar(&state, "state", "", "succeeded or failed (required)")
	fl.StringVar(&ref, "ref", "", "the remote reference, with --state succeeded")
	fl.StringVar(&by, "by", "", "who resolves it (required)")
	fl.StringVar(&reason, "reason", "", "what was checked (required)")
	return c
}

// resolved is what a resolution prints: a sentence, or the admin API's
// view of it (serve.EffectResolved) as one JSON object.
func resolved(w io.Writer, out ops.Format, r serve.EffectResolved) error {
	if out.Structured() {
		return ops.NewJSONEncoder(w).Encode(r)
	}
	_, err := fmt.Fprintf(w, "%s resolved %s by %s\n", r.IdempotencyKey, r.State, r.By)
	return err
}

// listEffects is effects list --server: the gateway consumer's calls.
func (c *adminClient) listEffects(action, state string, limit int, out ops.Format) error {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if action != "" {
		q.Set("action", action)
	}
	if state != "" {
		q.Set("state", state)
	}
	var res serve.EffectsView
	if err := c.call(http.MethodGet, "/v1/admin/effects?"+q.Encode(), "", nil, &res, readTimeout, "effects"); err != nil {
		return err
	}
	if res.Consumer == "" {
		return c.unreadable(errors.New("its list of external calls names no consumer"))
	}
	return writeEffects(c.cmd, res.Effects, res.More, out)
}

// resolveEffect is effects resolve --server.
func (c *adminClient) resolveEffect(key string, res ops.Resolution, out ops.Format) error {
	var got serve.EffectResolved
	if err := c.call(http.MethodPost, "/v1/admin/effects/"+serve.PathSegment(key)+"/resolve", fmt.Sprintf("call %q", key), res, &got, readTimeout); err != nil {
		return err
	}
	if got.IdempotencyKey != key || got.State != res.State {
		return c.unreadable(fmt.Errorf("it resolved %q to %q, not %q to %q", got.IdempotencyKey, got.State, key, res.State))
	}
	return resolved(c.cmd.OutOrStdout(), out, got)
}
