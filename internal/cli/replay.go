package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/spf13/cobra"
)

// policyFlags are the consumer policies replay and the operator commands
// share.
type policyFlags struct {
	db, consumer, now string
	pol               seqbox.Policies
	firstVersion      int64
	// nowGiven: --now was on the command line (an empty value given is
	// refused, not taken as the real clock).
	nowGiven func() bool
}

func (f *policyFlags) register(c *cobra.Command, defaultDB string) {
	fl := c.Flags()
	def := seqbox.DefaultPolicies()
	fl.StringVar(&f.db, "db", defaultDB, "SQLite file or postgres:// URL (default for replay: a temporary SQLite file)")
	fl.StringVar(&f.consumer, "consumer", "replay", "consumer name: part of every identity")
	fl.StringVar((*string)(&f.pol.GapPolicy), "gap-policy", string(def.GapPolicy), "version gap: hold or advance")
	fl.StringVar((*string)(&f.pol.OnDeadLetter), "on-dead-letter", string(def.OnDeadLetter), "ordered key after a dead letter: block or release")
	fl.StringVar((*string)(&f.pol.HoldExpiry), "hold-expiry", string(def.HoldExpiry), "when a hold times out: block or advance")
	fl.IntVar(&f.pol.Retry.MaxAttempts, "max-attempts", def.Retry.MaxAttempts, "deliveries before a transient failure is dead-lettered")
	fl.DurationVar(&f.pol.MaxAge, "max-age", def.MaxAge, "business deadline: events older than this are expired (0: none)")
	fl.DurationVar(&f.pol.HoldTimeout, "hold-timeout", def.HoldTimeout, "how long a version gap is held")
	fl.DurationVar(&f.pol.MaxBlock, "max-block", def.MaxBlock, "release a key blocked longer than this, with an alert (0: never)")
	fl.Int64Var(&f.firstVersion, "first-version", -1, "version every new key must start at (-1: first seen is the baseline)")
	fl.StringVar(&f.now, "now", "", "fixed current time, RFC 3339 (deterministic runs)")
	f.nowGiven = func() bool { return fl.Changed("now") }
}

func (f *policyFlags) config() (seqbox.Config, error) {
	cfg := seqbox.Config{Name: f.consumer, Policies: f.pol, Logger: consumerLogger()}
	if err := emptyPolicyFlag(f.pol); err != nil {
		return cfg, err
	}
	if f.pol.Retry.MaxAttempts < 1 {
		return cfg, fmt.Errorf("--max-attempts %d: must be at least 1", f.pol.Retry.MaxAttempts)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--max-age", f.pol.MaxAge}, {"--hold-timeout", f.pol.HoldTimeout}, {"--max-block", f.pol.MaxBlock}} {
		if d.v < 0 {
			return cfg, fmt.Errorf("%s %s: must not be negative", d.flag, d.v)
		}
	}
	if f.pol.HoldTimeout == 0 {
		return cfg, fmt.Errorf("--hold-timeout 0s: a hold needs a positive bound")
	}
	if f.firstVersion < -1 {
		return cfg, fmt.Errorf("--first-version %d: must be a version (0 or more), or -1 for the first version seen", f.firstVersion)
	}
	if f.firstVersion >= 0 {
		cfg.FirstVersion = &f.firstVersion
	}
	if f.now != "" || (f.nowGiven != nil && f.nowGiven()) {
		t, err := time.Parse(time.RFC3339Nano, f.now)
		if err != nil {
			return cfg, fmt.Errorf("--now %q: not an RFC 3339 time", f.now)
		}
		cfg.Now = func() time.Time { return t }
	}
	// The consumer's settings are checked here, before any database is
	// opened, created or migrated.
	return cfg, cfg.ValidateSettings()
}

// emptyPolicyFlag refuses a policy flag given as the empty string: each
// has a default of its own, so an empty value is a mistake, not a request
// for the default.
func emptyPolicyFlag(pol seqbox.Policies) error {
	for _, f := range []struct{ flag, v, want string }{
		{"--gap-policy", string(pol.GapPolicy), "hold or advance"},
		{"--hold-expiry", string(pol.HoldExpiry), "block or advance"},
		{"--on-dead-letter", string(pol.OnDeadLetter), "block or release"},
	} {
		if f.v == "" {
			return fmt.Errorf("%s \"\": want %s", f.flag, f.want)
		}
	}
	return nil
}

func replayCmd() *cobra.Command {
	var f policyFlags
	var state bool
	c := &cobra.Command{
		Use:   "replay [flags] FILE|-",
		Short: "Deliver CloudEvents JSON lines through the pipeline and print every result",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			var in io.Reader = os.Stdin
			if args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("replay: %w", err)
				}
				defer file.Close()
				if fi, err := file.Stat(); err == nil && fi.IsDir() {
					return fmt.Errorf("replay: %s is a directory, not a file of events", args[0])
				}
				in = file
			}
			ctx := cmd.Context()
			st, closeStore, err := openStore(ctx, f.db)
			if err != nil {
				return err
			}
			defer closeStore()
			cfg.Store = st
			c, err := replay.NewConsumer(cfg)
			if err != nil {
				return err
			}
			_, err = replay.Run(ctx, c, st, in, cmd.OutOrStdout(), replay.Options{State: state})
			return err
		},
	}
	f.register(c, "")
	c.Flags().BoolVar(&state, "state", false, "after the counters, print one JSON line per key")
	return c
}
