package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

// opFlags are the flags of the operator commands (dlq, keys): the same
// consumer policies as replay, so an action that releases a key drains it
// the way replay would, and --db is required.
type opFlags struct {
	policyFlags
	json bool
}

// register adds the policy flags to c; withJSON adds --json for commands
// that print rows rather than decisions.
func (f *opFlags) register(c *cobra.Command, withJSON bool) {
	f.policyFlags.register(c, "")
	c.Flags().Lookup("db").Usage = "the database a replay or consumer wrote (required)"
	if withJSON {
		c.Flags().BoolVar(&f.json, "json", false, "print one JSON object per line instead of text")
	}
}

// session is an open store and the consumer the flags describe.
type session struct {
	cfg   seqbox.Config
	store store.Store
	c     *seqbox.Consumer
	close func()
}

// run opens the session, runs fn with it and closes it.
func (f *opFlags) run(ctx context.Context, fn func(s *session) error) error {
	s, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s)
}

// open validates the flags and opens the existing database --db names.
func (f *opFlags) open(ctx context.Context) (*session, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	if f.consumer == "" {
		return nil, fmt.Errorf("--consumer: must not be empty")
	}
	if f.db == "" {
		return nil, fmt.Errorf("--db is required: the database the consumer wrote")
	}
	if !strings.Contains(f.db, "://") || strings.HasPrefix(f.db, "sqlite://") {
		path := strings.TrimPrefix(f.db, "sqlite://")
		if _, err := os.Stat(path); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("--db %s: %w", path, err)
		}
	}
	st, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return nil, err
	}
	cfg.Store = st
	// The consumer validates the policies even for commands that only read.
	cfg.Handler = replay.RecordHandler(cfg.Name)
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		closeStore()
		return nil, err
	}
	return &session{cfg: cfg, store: st, c: c, close: closeStore}, nil
}

// reporter builds key reports for the session's consumer.
func (s *session) reporter() ops.Reporter {
	return ops.Reporter{Op: s.store.Operator(), Consumer: s.cfg.Name, FirstVersion: s.cfg.FirstVersion, Now: s.now()}
}

func (s *session) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// consumer returns the consumer operator actions run through, with the
// record handler's tables in place: a redrive or a release applies
// messages the way replay would.
func (s *session) consumer(ctx context.Context) (*seqbox.Consumer, error) {
	if err := replay.EnsureRecordTables(ctx, s.store.DB()); err != nil {
		return nil, fmt.Errorf("create record tables: %w", err)
	}
	return s.c, nil
}

// notFound names the consumer in a not-found error: the usual cause is a
// missing --consumer.
func (s *session) notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w (consumer %q)", err, s.cfg.Name)
	}
	return err
}

// attribution are the --by and --reason flags every gap decision needs.
type attribution struct{ by, reason string }

func (a *attribution) register(c *cobra.Command) {
	c.Flags().StringVar(&a.by, "by", "", "who decides (required; recorded with the gap)")
	c.Flags().StringVar(&a.reason, "reason", "", "why (required; recorded with the gap)")
}

func (a *attribution) check(cmd string) error {
	if strings.TrimSpace(a.by) == "" || strings.TrimSpace(a.reason) == "" {
		return fmt.Errorf("%s: --by and --reason are required: the gap decision must be attributable", cmd)
	}
	return nil
}

// parseSeq reads a DLQ sequence number argument.
func parseSeq(cmd, arg string) (int64, error) {
	seq, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || seq < 1 {
		return 0, fmt.Errorf("%s: SEQ %q is not a DLQ sequence number (see seqbox dlq list)", cmd, arg)
	}
	return seq, nil
}

// subcommandPath is a command's path without the binary's name, as the
// errors main prints after "seqbox: " name it.
func subcommandPath(c *cobra.Command) string {
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

// groupCmd is a parent such as `seqbox dlq`: without a subcommand it shows
// its help; an unknown subcommand or a bad flag below it is a one-line
// error that names the full command.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see %s --help)", subcommandPath(c), err, c.CommandPath())
	})
	c.AddCommand(subs...)
	return c
}

// oneArg accepts exactly one positional argument, named in the error.
func oneArg(name string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s: expects one %s argument, got %d", subcommandPath(c), name, len(args))
		}
		return nil
	}
}
