package seqbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Issue 36, class 11: a Decide that returns no output and no error has
// decided (to do nothing special); its message applies, with an empty
// decision, instead of failing on the store's NOT NULL and dead-lettering.
func TestDecideReturningNothingApplies(t *testing.T) {
	b := setup(t)
	var seen []string
	b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) { return nil, nil }
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		d, ok := seqbox.DecisionFrom(ctx)
		seen = append(seen, ev.ID+":"+string(d)+":"+map[bool]string{true: "decided", false: "undecided"}[ok])
		return nil
	}
	c := b.consumer(t)
	results := mustDeliver(t, c, unversioned("e1", "opp"), 1)
	require.Equal(t, []string{"e1:applied"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{"e1::decided"}, seen)
}

// Issue 36, class 11: a panic's reason in the DLQ and the audit is the
// panic and where it happened, on one line, not the whole goroutine
// stack (which goes to the log).
func TestPanicReasonIsOneLine(t *testing.T) {
	for _, where := range []string{"decide", "handler"} {
		t.Run(where, func(t *testing.T) {
			b := setup(t)
			b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) {
				if where == "decide" {
					panic("the model client crashed")
				}
				return []byte("go"), nil
			}
			b.cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error {
				panic("the CRM client crashed")
			}
			c := b.consumer(t)
			results := mustDeliver(t, c, unversioned("e1", "opp"), 1)
			require.Equal(t, []string{"e1:dead_lettered"}, outcomes(results))
			letters, err := b.store.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: b.cfg.Name})
			require.NoError(t, err)
			require.Len(t, letters, 1)
			require.NotContains(t, letters[0].Reason+letters[0].FirstError, "goroutine ")
			for _, text := range []string{results[0].Reason, letters[0].LastError} {
				require.NotContains(t, text, "\n", "one line: %q", text)
				require.NotContains(t, text, "goroutine ")
				require.Contains(t, text, "crashed")
				require.True(t, strings.Contains(text, ".go:"), "names where it panicked: %q", text)
			}
		})
	}
}

// A copy at another process, of an identity whose first copy is being
// decided, meets the first one's claim in the transaction that takes its
// turn (preClaim): it waits for that decision, and the model is asked
// once. A copy with a business key runs with savepoints, so nothing but
// that transaction's claim result tells its decider the claim is
// another's; taken for its own, the copy's decider asked the model again
// beside the first (on SQLite without a look, on PostgreSQL after a look
// that found nothing decided yet).
func TestCopyAtAnotherProcessMeetsTheClaimOfTheOneBeingDecided(t *testing.T) {
	for kind, open := range map[string]func(*testing.T) *bundle{"sqlite": setup, "postgres": setupPostgres} {
		t.Run(kind, func(t *testing.T) {
			b := open(t)
			a := newAgent()
			release := make(chan struct{})
			a.block["x"] = release
			b.cfg.Decide = a.decide
			first := b.consumer(t)
			second := b.consumer(t) // another process: its own decider and claimant
			ctx := context.Background()
			msg := withBusinessKey("x", "opp", "refund:1")
			type delivered struct {
				results []seqboxtype.Result
				err     error
			}
			deliver := func(c *seqbox.Consumer, attempt int) chan delivered {
				ch := make(chan delivered, 1)
				go func() {
					results, err := c.Deliver(ctx, msg, attempt)
					ch <- delivered{results, err}
				}()
				return ch
			}
			firstDone := deliver(first, 1)
			require.Equal(t, "x", <-a.started)
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()

			secondDone := deliver(second, 2)
			select {
			case got := <-secondDone:
				require.NoError(t, got.err)
				require.Equal(t, []string{"x:retry"}, outcomes(got.results), got.results[0].Reason)
				require.Contains(t, got.results[0].Reason, "in flight elsewhere")
			case id := <-a.started:
				t.Fatalf("the model was asked for %s again by another process while the first call ran: %v", id, a.called())
			}

			close(release)
			got := <-firstDone
			require.NoError(t, got.err)
			require.Equal(t, []string{"x:applied"}, outcomes(got.results))
			got = <-deliver(second, 3)
			require.NoError(t, got.err)
			require.Equal(t, []string{"x:duplicate"}, outcomes(got.results))
			require.Equal(t, []string{"x"}, a.called())
		})
	}
}
