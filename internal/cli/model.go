package cli

import (
	"fmt"
	"runtime"
	"time"

	"github.com/seqbox/seqbox/internal/model"
	"github.com/spf13/cobra"
)

func modelCmd() *cobra.Command {
	return groupCmd("model", "Check the protocol's model exhaustively, and list the mutants it must catch",
		modelCheckCmd(), modelMutantsCmd())
}

// exitCode ends the process with code after the output said why.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func modelCheckCmd() *cobra.Command {
	b := model.DefaultBounds()
	var mutant string
	var small, large, noLiveness bool
	var maxStates int
	c := &cobra.Command{
		Use:   "check",
		Short: "Explore every interleaving within the bounds; print the shortest counterexample of any violation",
		Long: `Explore the protocol's model breadth first over every
interleaving of producers, an at-least-once broker, workers, crashes,
the remote side, the clock and an operator, within the bounds. It ends
with "model: states=N depth=D violations=V". On a violation it prints the
shortest run that reaches it as numbered steps and exits 1.

--small is the quick run; --large is the long run. --mutant widens the
bounds to what the mutant needs (a second key, a business key, a lost
heartbeat, a refusal, a gap). Bound flags given explicitly override both.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if small && large {
				return fmt.Errorf("model check: --small and --large exclude each other")
			}
			if maxStates < 0 {
				return fmt.Errorf("model check: --max-states %d is negative (0 is no limit)", maxStates)
			}
			chosen := model.DefaultBounds()
			switch {
			case small:
				chosen = model.SmallBounds()
			case large:
				chosen = model.LargeBounds()
			}
			mu, err := model.ParseMutant(mutant)
			if err != nil {
				return err
			}
			// A mutant widens the bounds to what it needs to show itself;
			// bound flags given explicitly override both.
			chosen = mu.Needs(chosen)
			overrideBounds(cmd, &chosen, b)
			m, err := model.New(chosen, mu)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "model: %s\n", chosen.Describe())
			fmt.Fprintf(out, "model: keys=%d versions=%d events=%d workers=%d crashes=%d expiries=%d failures=%d ops=%d max-attempts=%d",
				chosen.Keys, chosen.Versions, chosen.Events, chosen.Workers, chosen.Crashes, chosen.Expiries, chosen.Failures, chosen.Ops, chosen.MaxAttempts)
			if mu != "" {
				fmt.Fprintf(out, " mutant=%s (%s)", mu, mu.Describe())
			}
			fmt.Fprintln(out)
			progress := func(states, depth int) {
				fmt.Fprintf(out, "model: ... %d states, depth %d\n", states, depth)
			}
			ctx := cmd.Context()
			stop := func() bool { return ctx.Err() != nil }
			r := m.Check(model.Options{Liveness: !noLiveness, MaxStates: maxStates, Progress: progress, Stop: stop})
			if r.Violation != "" {
				fmt.Fprintf(out, "model: VIOLATION: %s\n", r.Violation)
				for _, l := range r.Trace {
					fmt.Fprintln(out, l)
				}
			}
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			fmt.Fprintf(out, "model: %d transitions in %s (%d MiB)\n", r.Transitions, r.Elapsed.Round(time.Millisecond), mem.Sys>>20)
			switch {
			case !r.Complete && ctx.Err() != nil:
				fmt.Fprintf(out, "model: INCOMPLETE: interrupted\n")
			case !r.Complete:
				fmt.Fprintf(out, "model: INCOMPLETE: stopped at --max-states %d (about 500 bytes a state)\n", maxStates)
			}
			fmt.Fprintf(out, "model: states=%d depth=%d violations=%d\n", r.States, r.Depth, r.Violations())
			switch {
			case r.Violation != "":
				return exitCode(1)
			case !r.Complete:
				return exitCode(1)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&mutant, "mutant", "", "switch on a known way to break the protocol (seqbox model mutants)")
	f.BoolVar(&small, "small", false, "the smaller bounds of the quick run")
	f.BoolVar(&large, "large", false, "the larger bounds of the long run")
	f.BoolVar(&noLiveness, "no-liveness", false, "skip the liveness check (every reachable state can still settle)")
	f.IntVar(&maxStates, "max-states", 30_000_000, "stop, incomplete, past this many states (about 500 bytes each; 0: no limit)")
	f.IntVar(&b.Keys, "keys", b.Keys, "ordered keys (the first versioned, the second unversioned)")
	f.IntVar(&b.Versions, "versions", b.Versions, "events of the first key")
	f.IntVar(&b.Events, "events", b.Events, "events of every other key")
	f.IntVar(&b.Workers, "workers", b.Workers, "concurrent workers (processes)")
	f.IntVar(&b.Crashes, "crashes", b.Crashes, "worker crashes (SIGKILL at any step)")
	f.IntVar(&b.Expiries, "expiries", b.Expiries, "leases, claims or ledger rows lost by a live worker (slow step, late heartbeat)")
	f.IntVar(&b.Failures, "failures", b.Failures, "transient refusals or redirects by the remote side")
	f.IntVar(&b.Ops, "ops", b.Ops, "operator actions (redrive, skip, release)")
	f.IntVar(&b.MaxAttempts, "max-attempts", b.MaxAttempts, "the consumer's Retry.MaxAttempts")
	f.BoolVar(&b.Resend, "resend", b.Resend, "a producer re-sends the first event")
	f.BoolVar(&b.Collision, "collision", b.Collision, "an event reuses the first event's identity with another payload")
	f.BoolVar(&b.BusinessKey, "business-key", b.BusinessKey, "an unkeyed event asks for the first event's business key under a new identity")
	f.BoolVar(&b.Gap, "gap", b.Gap, "the first key's last event skips a version")
	f.BoolVar(&b.Poison, "poison", b.Poison, "the last key's last event fails permanently at the remote side")
	f.BoolVar(&b.Deadline, "deadline", b.Deadline, "the business deadline (MaxAge) may pass, for every event at once")
	return c
}

// overrideBounds copies into b the bound flags the user set explicitly.
func overrideBounds(cmd *cobra.Command, b *model.Bounds, given model.Bounds) {
	ints := map[string][2]*int{"keys": {&b.Keys, &given.Keys}, "versions": {&b.Versions, &given.Versions}, "events": {&b.Events, &given.Events},
		"workers": {&b.Workers, &given.Workers}, "crashes": {&b.Crashes, &given.Crashes}, "expiries": {&b.Expiries, &given.Expiries},
		"failures": {&b.Failures, &given.Failures}, "ops": {&b.Ops, &given.Ops}, "max-attempts": {&b.MaxAttempts, &given.MaxAttempts}}
	bools := map[string][2]*bool{"resend": {&b.Resend, &given.Resend}, "collision": {&b.Collision, &given.Collision},
		"business-key": {&b.BusinessKey, &given.BusinessKey}, "gap": {&b.Gap, &given.Gap}, "poison": {&b.Poison, &given.Poison},
		"deadline": {&b.Deadline, &given.Deadline}}
	for name, p := range ints {
		if cmd.Flags().Changed(name) {
			*p[0] = *p[1]
		}
	}
	for name, p := range bools {
		if cmd.Flags().Changed(name) {
			*p[0] = *p[1]
		}
	}
}

func modelMutantsCmd() *cobra.Command {
	var long bool
	c := &cobra.Command{
		Use:   "mutants",
		Short: "List the known ways to break the protocol that model check must catch, one a line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, m := range model.Mutants() {
				if long {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", m, m.Describe())
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), m)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&long, "long", "l", false, "say what each one breaks")
	return c
}
