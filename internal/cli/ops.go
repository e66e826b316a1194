package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

// opFlags are the flags every operator command shares. The consumer's
// policies are not among them: they come from its registration.
type opFlags struct {
	db, consumer string
	// output is --output as given; json is the older --json (JSON lines);
	// out is the format they say, set before the command runs.
	output string
	json   bool
	out    ops.Format
	// server and token reach a running gateway instead of --db
	// (remote.go).
	server, token string
}

// register adds --db, --consumer, --server, --admin-token and --output
// to c; withJSON adds the older --json (hidden: --output jsonl) for the
// commands that had it.
func (f *opFlags) register(c *cobra.Command, withJSON bool) {
	fl := c.Flags()
	fl.StringVarP(&f.output, "output", "o", string(ops.Text), "text (tables and sentences, for people), json (one JSON document, for scripts) or jsonl (one JSON object per line)")
	c.PreRunE = func(*cobra.Command, []string) error {
		out, err := ops.ParseFormat(f.output)
		if err != nil {
			return err
		}
		if f.json {
			if c.Flags().Changed("output") && out != ops.JSONLines {
				return fmt.Errorf("--json is --output jsonl: it cannot go with --output %s", out)
			}
			out = ops.JSONLines
		}
		f.out = out
		return nil
	}
	fl.StringVar(&f.db, "db", "", "the consumer's database: a SQLite file path or a postgres:// URL (required unless --server)")
	fl.StringVar(&f.consumer, "consumer", "", "the consumer's name (default: the only consumer registered in the database)")
	fl.StringVar(&f.server, "server", "", "talk to a running seqbox serve at this URL (its admin API) instead of opening --db")
	fl.StringVar(&f.token, "admin-token", "", "the gateway's admin token for --server, sent as a Bearer token (default: $"+AdminTokenEnv+")")
	if withJSON {
		fl.BoolVar(&f.json, "json", false, "the same as --output jsonl")
		_ = fl.MarkHidden("json")
	}
}

// session is a database opened read-only and the consumer the flags name.
type session struct {
	db    string
	reg   store.Registration
	pol   seqbox.Policies
	store store.Store
	close func()
}

// inspect opens --db read-only, finds the consumer and runs fn. Nothing is
// written, so it works on a read-only file.
func (f *opFlags) inspect(ctx context.Context, fn func(s *session) error) error {
	s, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s)
}

func (f *opFlags) open(ctx context.Context) (*session, error) {
	if f.db == "" {
		return nil, fmt.Errorf("--db is required: the database the consumer uses")
	}
	if f.token != "" {
		return nil, fmt.Errorf("--admin-token is for --server: the database path needs no token")
	}
	st, closeStore, err := openStoreAccess(ctx, f.db, store.ReadOnly)
	if err != nil {
		return nil, err
	}
	reg, err := findConsumer(ctx, st, f.db, f.consumer)
	if err != nil {
		closeStore()
		return nil, err
	}
	pol, err := seqbox.RegisteredPolicies(reg)
	if err != nil {
		closeStore()
		return nil, err
	}
	return &session{db: f.db, reg: reg, pol: pol, store: st, close: closeStore}, nil
}

// findConsumer returns the registration --consumer names, or the only one
// there is; otherwise the error lists the consumers that exist.
func findConsumer(ctx context.Context, st store.Store, db, name string) (store.Registration, error) {
	regs, err := st.Executor().ConsumerList(ctx)
	if err != nil {
		return store.Registration{}, err
	}
	names := make([]string, len(regs))
	for i, r := range regs {
		if r.Consumer == name || (name == "" && len(regs) == 1) {
			return r, nil
		}
		names[i] = strconv.Quote(r.Consumer)
	}
	switch {
	case len(regs) == 0:
		return store.Registration{}, fmt.Errorf("%s: no consumer has registered in this database yet (a consumer registers on its first delivery)", db)
	case name == "":
		return store.Registration{}, fmt.Errorf("--consumer is required: %s has consumers %s", db, strings.Join(names, ", "))
	}
	return store.Registration{}, fmt.Errorf("--consumer %q: no such consumer in %s; it has %s", name, db, strings.Join(names, ", "))
}

// reporter builds key reports for the session's consumer.
func (s *session) reporter() ops.Reporter {
	return ops.Reporter{Op: s.store.Executor(), Consumer: s.reg.Consumer, FirstVersion: s.pol.FirstVersion,
		Now: time.Now(), DB: s.db}
}

// notFound names the consumer in a not-found error: the usual cause is the
// wrong --consumer.
func (s *session) notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w (consumer %q)", err, s.reg.Consumer)
	}
	return err
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

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
// its help; an unknown subcommand is an "unknown command" error that names
// the full command (before any of its flags are looked at), and a bad flag
// below it is a one-line error that names the full command.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:                        use,
		Short:                      short,
		DisableFlagParsing:         true,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())
		},
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
