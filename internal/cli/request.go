package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

// actionFlags are the flags of the commands that ask the owning consumer
// to act (dlq redrive, dlq skip, keys release).
type actionFlags struct {
	opFlags
	by, reason string
	wait       time.Duration
}

// register adds the shared flags; attributed makes --by and --reason
// required (a recorded gap must be attributable).
func (f *actionFlags) register(c *cobra.Command, attributed bool) {
	f.opFlags.register(c, false)
	fl := c.Flags()
	by, reason := "who asks (default: $USER)", "why (recorded on the request)"
	if attributed {
		by, reason = "who decides (required; recorded with the gap)", "why (required; recorded with the gap)"
	}
	fl.StringVar(&f.by, "by", "", by)
	fl.StringVar(&f.reason, "reason", "", reason)
	fl.DurationVar(&f.wait, "wait", 30*time.Second, "how long to wait for the consumer to execute the request")
}

func (f *actionFlags) check(cmd string, attributed bool) error {
	if f.wait <= 0 {
		return fmt.Errorf("%s: --wait %s: must be positive", cmd, f.wait)
	}
	if attributed && (blank(f.by) || blank(f.reason)) {
		return fmt.Errorf("%s: --by and --reason are required: the recorded gap must be attributable", cmd)
	}
	if f.by == "WHO" || f.reason == "WHY" {
		return fmt.Errorf("%s: --by WHO --reason WHY are placeholders: say who decides and why (they are recorded)", cmd)
	}
	if blank(f.by) {
		f.by = os.Getenv("USER")
		if blank(f.by) {
			f.by = "operator"
		}
	}
	return nil
}

// request records an operator request for the consumer and prints its
// result (ops.Acted, the admin API's view, by ops.WriteActed). A consumer
// with an application handler executes it in its own Run; one registered
// with the built-in record handler (a replay's database) and not running
// is driven here, in-process.
func (f *actionFlags) request(cmd *cobra.Command, s *session, action, target string) error {
	ctx := cmd.Context()
	// A database the CLI made stays its own; an application's database
	// is adopted (seqbox writes only its request table).
	st, closeStore, err := openOwned(ctx, f.db)
	if err != nil {
		return err
	}
	defer closeStore()
	ctl := st.Executor()
	seq, err := ctl.RequestInsert(ctx, store.OperatorRequest{Consumer: s.reg.Consumer, Action: action, Target: target,
		RequestedBy: f.by, Reason: f.reason, RequestedAt: time.Now()})
	if err != nil {
		return err
	}
	if s.reg.HandlerKind == store.HandlerRecord && !live(s.reg) {
		if err := runInProcess(ctx, st, s); err != nil {
			return err
		}
	}
	r, err := awaitRequest(ctx, ctl, seq, f.wait, s.reg)
	if err != nil {
		return err
	}
	if r.State == seqboxtype.RequestFailed {
		return fmt.Errorf("%s: consumer %q (%s) refused request %d: %s", subcommandPath(cmd), r.Consumer, r.TakenBy, seq, r.Error)
	}
	a, err := ops.ActedOf(r)
	if err != nil {
		return err
	}
	if err := a.NoteDeadLetter(ctx, ctl, r.Consumer); err != nil {
		return err
	}
	if err := ops.WriteActed(cmd.OutOrStdout(), f.out, a); err != nil {
		return err
	}
	if a.FailedAgain() {
		return failedAgain(cmd, a)
	}
	return nil
}

// failedAgain ends a redrive whose message failed again (a.FailedAgain):
// its result is printed, and this says on stderr that the message is
// dead-lettered once more (still as dlq a.DeadLetter, which keeps its
// number, when known) and why; the command exits with status 1.
func failedAgain(cmd *cobra.Command, a ops.Acted) error {
	as := ""
	if a.DeadLetter != nil {
		as = " (still dlq " + strconv.FormatInt(*a.DeadLetter, 10) + ")"
	}
	own, _ := a.Own()
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s: source=%q id=%q failed again and is dead-lettered%s: %s\n",
		cmd.Root().Name(), subcommandPath(cmd), own.Source, own.ID, as, own.Reason)
	return exitCode(1)
}

// live reports whether a consumer process has sent a heartbeat lately.
func live(r store.Registration) bool {
	return !r.HeartbeatAt.IsZero() && time.Since(r.HeartbeatAt) < seqbox.LiveWithin
}

// runInProcess executes the pending requests of a record-handler consumer
// with its registered policies.
func runInProcess(ctx context.Context, st store.Store, s *session) error {
	cfg := seqbox.Config{Name: s.reg.Consumer, Store: st,
		Logger: consumerLogger(), Policies: s.pol}
	c, err := replay.NewConsumer(cfg)
	if err != nil {
		return err
	}
	if err := replay.EnsureRecordTables(ctx, st.DB()); err != nil {
		return fmt.Errorf("create record tables: %w", err)
	}
	_, err = c.RunRequests(ctx)
	return err
}

// awaitRequest waits for the request's result; the errors say what to do
// next in the CLI's words.
func awaitRequest(ctx context.Context, ctl store.Executor, seq int64, wait time.Duration, reg store.Registration) (store.OperatorRequest, error) {
	r, err := ops.AwaitRequest(ctx, ctl, seq, wait, 100*time.Millisecond)
	var running *ops.StillRunningError
	switch {
	case errors.Is(err, ops.ErrNotTaken):
		return r, fmt.Errorf("no live consumer %q took request %d within %s (%s); the request is cancelled: start the consumer and run the command again",
			reg.Consumer, seq, wait, heartbeatText(reg))
	case errors.As(err, &running):
		return r, fmt.Errorf("%w: check with seqbox dlq list / keys show", err)
	}
	return r, err
}

func heartbeatText(r store.Registration) string {
	if r.HeartbeatAt.IsZero() {
		return "no Run of it has a heartbeat; it registered at " + r.StartedAt.Format(time.RFC3339) + " from " + r.Process +
			", and a consumer driven by Deliver takes requests only when it calls Maintain or RunRequests"
	}
	return fmt.Sprintf("last heartbeat %s ago from %s", time.Since(r.HeartbeatAt).Round(time.Second), r.Process)
}
