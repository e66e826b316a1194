package main

import (
	"fmt"

	"github.com/seqbox/seqbox/internal/ops"
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
			return f.run(cmd.Context(), func(s *session) error {
				dls, err := s.store.Operator().DeadLetters(cmd.Context(), s.cfg.Name, all)
				if err != nil {
					return err
				}
				return ops.WriteDeadLetters(cmd.OutOrStdout(), dls, f.json)
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
			return f.run(cmd.Context(), func(s *session) error {
				dl, err := s.store.Operator().DeadLetter(cmd.Context(), s.cfg.Name, seq)
				if err != nil {
					return s.notFound(fmt.Errorf("dlq %d: %w", seq, err))
				}
				return ops.WriteDeadLetter(cmd.OutOrStdout(), dl, f.json)
			})
		},
	}
	f.register(c, true)
	return c
}

func dlqRedriveCmd() *cobra.Command {
	var f opFlags
	c := &cobra.Command{
		Use:   "redrive SEQ",
		Short: "Send a dead letter back through the pipeline; print every decision as replay does",
		Long: `Send a dead letter back through the pipeline under its original identity.
If it blocked its key, the key is released and the messages parked behind it
apply after it, in version order. A transient failure is redriven again at
once, as replay does, until the message applies or is dead-lettered again. Each decision prints as a JSON line, in the
format of seqbox replay.`,
		Args: oneArg("SEQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq("dlq redrive", args[0])
			if err != nil {
				return err
			}
			return f.run(cmd.Context(), func(s *session) error {
				c, err := s.consumer(cmd.Context())
				if err != nil {
					return err
				}
				ds, err := ops.Redrive(cmd.Context(), c, seq, f.maxAttempts)
				if err != nil {
					return s.notFound(err)
				}
				return ops.WriteDecisions(cmd.OutOrStdout(), ds)
			})
		},
	}
	f.register(c, false)
	return c
}

func dlqSkipCmd() *cobra.Command {
	var f opFlags
	var a attribution
	c := &cobra.Command{
		Use:   "skip SEQ --by WHO --reason WHY",
		Short: "Resolve a dead letter without applying it and release its key",
		Long: `Resolve a dead letter without applying it. The skipped version is recorded
as a known gap with who decided and why; the key is released and the messages
parked behind it apply in version order. Each decision prints as a JSON line,
in the format of seqbox replay.`,
		Args: oneArg("SEQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq("dlq skip", args[0])
			if err != nil {
				return err
			}
			if err := a.check("dlq skip"); err != nil {
				return err
			}
			return f.run(cmd.Context(), func(s *session) error {
				c, err := s.consumer(cmd.Context())
				if err != nil {
					return err
				}
				ds, err := c.Skip(cmd.Context(), seq, a.by, a.reason)
				if err != nil {
					return s.notFound(err)
				}
				return ops.WriteDecisions(cmd.OutOrStdout(), ds)
			})
		},
	}
	f.register(c, false)
	a.register(c)
	return c
}
