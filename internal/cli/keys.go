package cli

import (
	"fmt"
	"io"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

func keysCmd() *cobra.Command {
	return groupCmd("keys", "Inspect ordered keys and release the stuck ones",
		keysListCmd(), keysShowCmd(), keysReleaseCmd())
}

func keysListCmd() *cobra.Command {
	var f opFlags
	var all bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List stuck keys (blocked or holding) with what to do about each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.listKeys(all, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				reps, err := s.reporter().Keys(cmd.Context(), all)
				if err != nil {
					return err
				}
				return ops.WriteKeys(cmd.OutOrStdout(), reps, f.out)
			})
		},
	}
	f.register(c, true)
	c.Flags().BoolVar(&all, "all", false, "list every key, not only the stuck ones")
	return c
}

func keysShowCmd() *cobra.Command {
	var f opFlags
	var parked int
	c := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one key: its state, parked messages (the lowest --parked), gaps and recent audit",
		Args:  oneArg("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if parked < 1 || parked > maxParkedShown {
				return fmt.Errorf("keys show: --parked %d: want 1 to %d", parked, maxParkedShown)
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.showKey(args[0], parked, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				d, err := s.reporter().KeyPage(cmd.Context(), args[0], nil, parked)
				if err != nil {
					return s.notFound(fmt.Errorf("key %q: %w", args[0], err))
				}
				return writeKey(cmd.OutOrStdout(), d, f.out)
			})
		},
	}
	f.register(c, true)
	c.Flags().IntVar(&parked, "parked", ops.ParkedShown, fmt.Sprintf("how many parked messages to show, the lowest versions first (1 to %d; parked_total says how many there are)", maxParkedShown))
	return c
}

// maxParkedShown bounds keys show --parked, as the admin API bounds
// ?parked_limit.
const maxParkedShown = 10000

func keysReleaseCmd() *cobra.Command {
	var f actionFlags
	c := &cobra.Command{
		Use:   "release KEY --by WHO --reason WHY",
		Short: "Ask the consumer to unblock a key blocked by a version gap; say what came of it",
		Long: `Ask the consumer that owns the key to unblock it when a version gap blocks it
(a hold that timed out with hold expiry block). The missing versions are
recorded as a known gap with who decided and why, and the parked messages
apply in version order through the consumer's own handler. One sentence
says what came of it (--output json or jsonl for scripts). See seqbox dlq
redrive --help for how the request reaches the consumer.`,
		Args: oneArg("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check("keys release", true); err != nil {
				return err
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.releaseKey(args[0], &f) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				// A key blocked behind a dead letter is released by resolving
				// that dead letter, so the DLQ and the key agree.
				d, err := s.reporter().Key(cmd.Context(), args[0])
				if err != nil {
					return s.notFound(fmt.Errorf("keys release: key %q: %w", args[0], err))
				}
				if b := d.BlockedBy; b != nil {
					return fmt.Errorf("keys release: key %q is blocked behind dead-lettered message source=%q id=%q, not by a gap: %s",
						args[0], b.Source, b.ID, d.Action)
				}
				if !d.Blocked && d.Turn == nil {
					return fmt.Errorf("keys release: key %q is not blocked (status %s)", args[0], d.Status)
				}
				return f.request(cmd, s, store.ActionRelease, args[0])
			})
		},
	}
	f.register(c, true)
	return c
}

// writeKey prints one key in full: text, or the key's report followed by
// the admin API's view of what is recorded about it (serve.KeyRecord),
// one view for every way out. --output json is one object, the report's
// fields with first_version and the parked, gaps and audit arrays;
// --output jsonl is a line per record, told apart by kind: one "key"
// line (the report and first_version), then "parked", "gap" and "audit"
// lines.
func writeKey(w io.Writer, d ops.KeyDetail, out ops.Format) error {
	if !out.Structured() {
		return ops.WriteKey(w, d)
	}
	rec := serve.KeyRecordOf(d)
	if out == ops.JSON {
		return ops.NewJSONEncoder(w).Encode(struct {
			ops.KeyReport
			serve.KeyRecord
		}{d.KeyReport, rec})
	}
	type kind struct {
		Kind string `json:"kind"`
	}
	lines := []any{struct {
		kind
		ops.KeyReport
		FirstVersion ops.FirstVersionRule `json:"first_version"`
	}{kind{"key"}, d.KeyReport, rec.FirstVersion}}
	for _, p := range rec.Parked {
		lines = append(lines, struct {
			kind
			serve.ParkedView
		}{kind{"parked"}, p})
	}
	for _, g := range rec.Gaps {
		lines = append(lines, struct {
			kind
			serve.GapView
		}{kind{"gap"}, g})
	}
	for _, a := range rec.Audit {
		lines = append(lines, struct {
			kind
			serve.AuditView
		}{kind{"audit"}, a})
	}
	return ops.WriteRows(w, ops.JSONLines, lines)
}
