package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

func dlqCmd() *cobra.Command {
	return groupCmd("dlq", "Inspect and resolve dead letters",
		dlqListCmd(), dlqShowCmd(), dlqRedriveCmd(), dlqSkipCmd())
}

func dlqListCmd() *cobra.Command {
	var f opFlags
	var all bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List unresolved dead letters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.listDLQ(all, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				letters, err := s.store.Executor().DeadLetterList(cmd.Context(), store.DeadLetterListParams{Consumer: s.reg.Consumer, All: all})
				if err != nil {
					return err
				}
				return writeDeadLetters(cmd.OutOrStdout(), letters, f.out)
			})
		},
	}
	f.register(c, true)
	c.Flags().BoolVar(&all, "all", false, "include redriven and skipped dead letters")
	return c
}

func dlqShowCmd() *cobra.Command {
	var f opFlags
	c := &cobra.Command{
		Use:   "show SEQ",
		Short: "Show one dead letter in full, with its errors and original envelope",
		Args:  oneArg("SEQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq("dlq show", args[0])
			if err != nil {
				return err
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.showDLQ(seq, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				letter, err := s.store.Executor().DeadLetterGet(cmd.Context(), store.DeadLetterRef{Consumer: s.reg.Consumer, Seq: seq})
				if err != nil {
					return s.notFound(fmt.Errorf("dlq %d: %w", seq, err))
				}
				return writeDeadLetter(cmd.OutOrStdout(), letter, f.out)
			})
		},
	}
	f.register(c, true)
	return c
}

func dlqRedriveCmd() *cobra.Command {
	var f actionFlags
	c := &cobra.Command{
		Use:   "redrive SEQ",
		Short: "Ask the consumer to send a dead letter back through its pipeline; say what came of it",
		Long: `Ask the consumer that owns the dead letter to send it back through its own
pipeline and handler, under its original identity. If it blocked its key, the
key is released and the messages parked behind it apply after it, in version
order. A transient failure is redriven again, up to the consumer's attempts.

The request is recorded in the database with who asked and why; a running
consumer executes it within a second and one sentence says what came of
it (--output json: one JSON object with the results; --output jsonl: a
result a line, in the format of seqbox replay). A database that seqbox replay or demo wrote
has no consumer of its own running: the command executes the request
itself. When no live consumer takes the request within --wait, it is
cancelled and the command fails saying so.

With --server URL the command asks a running seqbox serve instead, through
its admin API (--admin-token or SEQBOX_ADMIN_TOKEN): the gateway's own
consumer executes the request, records who asked and why, and the
results print the same way.`,
		Args: oneArg("SEQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq("dlq redrive", args[0])
			if err != nil {
				return err
			}
			if err := f.check("dlq redrive", false); err != nil {
				return err
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.resolveDLQ(seq, "redrive", &f) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				if err := openDeadLetter(cmd, s, seq); err != nil {
					return err
				}
				return f.request(cmd, s, store.ActionRedrive, strconv.FormatInt(seq, 10))
			})
		},
	}
	f.register(c, false)
	return c
}

func dlqSkipCmd() *cobra.Command {
	var f actionFlags
	c := &cobra.Command{
		Use:   "skip SEQ --by WHO --reason WHY",
		Short: "Ask the consumer to resolve a dead letter without applying it and release its key",
		Long: `Ask the consumer that owns the dead letter to resolve it without applying it.
The skipped version is recorded as a known gap with who decided and why; the
key is released and the messages parked behind it apply in version order,
through the consumer's own handler. One sentence says what came of it
(--output json or jsonl for scripts). See seqbox dlq redrive --help for how
the request reaches the consumer.`,
		Args: oneArg("SEQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq("dlq skip", args[0])
			if err != nil {
				return err
			}
			if err := f.check("dlq skip", true); err != nil {
				return err
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.resolveDLQ(seq, "skip", &f) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				if err := openDeadLetter(cmd, s, seq); err != nil {
					return err
				}
				return f.request(cmd, s, store.ActionSkip, strconv.FormatInt(seq, 10))
			})
		},
	}
	f.register(c, true)
	return c
}

// openDeadLetter checks, before asking the consumer, that DLQ row seq
// exists and is still open, so a typo fails at once.
func openDeadLetter(cmd *cobra.Command, s *session, seq int64) error {
	letter, err := s.store.Executor().DeadLetterGet(cmd.Context(), store.DeadLetterRef{Consumer: s.reg.Consumer, Seq: seq})
	if err != nil {
		return s.notFound(fmt.Errorf("%s: dlq %d: %w", subcommandPath(cmd), seq, err))
	}
	if letter.State != seqboxtype.DeadLetterOpen {
		return fmt.Errorf("%s: dlq %d: %w (%s)", subcommandPath(cmd), seq, seqbox.ErrNotBlocking, letter.Resolution)
	}
	return nil
}

// writeDeadLetters prints dead letters: the table, or the admin API's
// JSON view of each (serve.DeadLetterView), one view for every way out.
func writeDeadLetters(w io.Writer, letters []store.DeadLetter, out ops.Format) error {
	if !out.Structured() {
		return ops.WriteDeadLetters(w, letters)
	}
	views := make([]serve.DeadLetterView, len(letters))
	for i, letter := range letters {
		views[i] = serve.DeadLetterViewOf(letter, false)
	}
	return ops.WriteRows(w, out, views)
}

// writeDeadLetter prints one dead letter in full: text, or the admin
// API's JSON view with its envelope.
func writeDeadLetter(w io.Writer, letter store.DeadLetter, out ops.Format) error {
	if !out.Structured() {
		return ops.WriteDeadLetter(w, letter)
	}
	return ops.NewJSONEncoder(w).Encode(serve.DeadLetterViewOf(letter, true))
}
