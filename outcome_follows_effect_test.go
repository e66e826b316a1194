package seqbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
)

// timed is an event of key opp at version v that occurred at t.
func timed(id string, v int, t time.Time, bk string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","partitionkey":"opp","objectversion":%d,"time":%q,"businesskey":%q}`,
		id, v, t.Format(time.RFC3339), bk)
}

// deadlineHour is a consumer's bundle with a business deadline of an hour
// on a clock the test moves, and an agent whose call for e1 waits until
// the test closes a.block["e1"].
func deadlineHour(t *testing.T) (*bundle, *agent, *testclock.Clock) {
	b := setup(t)
	a := newAgent()
	clock := newFoundClock()
	a.block["e1"] = make(chan struct{})
	b.cfg.Now, b.cfg.Decide, b.cfg.MaxAge = clock.Now, a.decide, time.Hour
	return b, a, clock
}

// Class 6 of issue 36: MaxAge passes while the agent works on the call.
// The agent applied it, so the event is applied, not expired: the
// deadline is checked before the call, never after it. The key's version
// advances, and a later event of the same business key is a semantic
// duplicate, not a dead letter.
func TestDeadlinePassingDuringTheCallStillApplies(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		t.Run(fmt.Sprint("keyed=", keyed), func(t *testing.T) {
			b, a, clock := deadlineHour(t)
			c := b.consumer(t)
			ev := timed("e1", 1, clock.Now().Add(-50*time.Minute), "refund:1")
			if !keyed {
				ev = fmt.Appendf(nil, `{"id":"e1","source":"crm","type":"t","time":%q,"businesskey":"refund:1"}`,
					clock.Now().Add(-50*time.Minute).Format(time.RFC3339))
			}
			done := make(chan []seqboxtype.Result, 1)
			go func() { done <- mustDeliver(t, c, ev, 1) }()
			require.Equal(t, "e1", <-a.started, "asked before its deadline")
			clock.Advance(20 * time.Minute) // the deadline passes while the agent works
			close(a.block["e1"])
			results := <-done
			require.Equal(t, []string{"e1:applied"}, outcomes(results), "the call took effect: %s", results[0].Reason)

			later := timed("e2", 2, clock.Now(), "refund:1")
			if !keyed {
				later = fmt.Appendf(nil, `{"id":"e2","source":"crm","type":"t","time":%q,"businesskey":"refund:1"}`, clock.Now().Format(time.RFC3339))
			}
			results = mustDeliver(t, c, later, 1)
			require.Equal(t, []string{"e2:semantic_duplicate"}, outcomes(results), results[0].Reason)
			require.Equal(t, []string{"e1"}, a.called())
		})
	}
}

// The deadline is checked before the call: an event that expires while
// it waits for its decision is not sent to the agent at all.
func TestDeadlinePassedBeforeTheCallIsNotAsked(t *testing.T) {
	b := setup(t)
	a := newAgent()
	clock := newFoundClock()
	a.block["e0"] = make(chan struct{})
	b.cfg.Now, b.cfg.Decide, b.cfg.MaxAge, b.cfg.DecideConcurrency = clock.Now, a.decide, time.Hour, 1
	c := b.consumer(t)
	first := make(chan []seqboxtype.Result, 1)
	go func() {
		first <- mustDeliver(t, c, fmt.Appendf(nil, `{"id":"e0","source":"crm","type":"t","partitionkey":"other"}`), 1)
	}()
	require.Equal(t, "e0", <-a.started) // e0 holds the only Decide slot
	second := make(chan []seqboxtype.Result, 1)
	ev := timed("e1", 1, clock.Now().Add(-50*time.Minute), "")
	go func() { second <- mustDeliver(t, c, ev, 1) }()
	// e1 passed the pipeline (its turn is committed) and waits for the
	// slot; its deadline passes meanwhile.
	waitfor.That(t, time.Minute, "e1 to take its turn", func() bool {
		var n int
		require.NoError(t, b.store.DB().QueryRowContext(context.Background(),
			`SELECT COUNT(*) FROM seqbox_retries WHERE id = 'e1'`).Scan(&n))
		return n == 1
	})
	clock.Advance(20 * time.Minute)
	close(a.block["e0"])
	require.Equal(t, []string{"e0:applied"}, outcomes(<-first))
	results := <-second
	require.Equal(t, []string{"e1:expired"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{"e0"}, a.called(), "an expired event is not sent to the agent")
}

// A copy of an event whose call runs elsewhere, received once the event's
// deadline passed (the broker redelivered it: the first copy's lease ran
// out during a slow model call), does not end the event expired: the
// call may take effect, so the event applies when it does. Ending it
// expired ended its key's turn too, and the key's next version reached
// the agent while the first call still ran.
func TestCopyPastItsDeadlineWhileItsCallRunsIsNotExpired(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		t.Run(fmt.Sprint("keyed=", keyed), func(t *testing.T) {
			b, a, clock := deadlineHour(t)
			b.cfg.ClaimHeartbeat = 20 * time.Millisecond
			first, other := b.consumer(t), b.consumer(t) // two processes
			ev := timed("e1", 1, clock.Now().Add(-50*time.Minute), "")
			if !keyed {
				ev = fmt.Appendf(nil, `{"id":"e1","source":"crm","type":"t","time":%q}`,
					clock.Now().Add(-50*time.Minute).Format(time.RFC3339))
			}
			done := make(chan []seqboxtype.Result, 1)
			go func() { done <- mustDeliver(t, first, ev, 1) }()
			require.Equal(t, "e1", <-a.started, "asked before its deadline")
			clock.Advance(20 * time.Minute) // the deadline passes while the agent works
			waitfor.That(t, time.Minute, "the live decider to renew its claim", func() bool {
				var until int64
				require.NoError(t, b.store.DB().QueryRowContext(context.Background(),
					`SELECT expires_at FROM seqbox_decision_claims WHERE id = 'e1'`).Scan(&until))
				return until > clock.Now().UnixMicro()
			})

			copied := mustDeliver(t, other, ev, 2)
			require.NotEqual(t, []string{"e1:expired"}, outcomes(copied), "its call is running: %s", copied[0].Reason)
			if keyed {
				next := mustDeliver(t, other, timed("e2", 2, clock.Now(), ""), 1)
				require.Equal(t, []string{"e2:held"}, outcomes(next), "behind e1, whose call runs: %s", next[0].Reason)
			}

			require.Equal(t, []string{"e1"}, a.called(), "nothing else of its key is asked while its call runs")

			close(a.block["e1"])
			results := <-done
			require.Equal(t, "e1:applied", outcomes(results)[0], "the call took effect: %s", results[0].Reason)
			require.Equal(t, "applied", outcomeOf(t, b, "e1"))
			if keyed {
				// e2 was let out by e1's outcome, and asked after it.
				require.Equal(t, []string{"e1:applied", "e2:applied"}, outcomes(results))
				require.Equal(t, []string{"e1", "e2"}, a.called())
			} else {
				require.Equal(t, []string{"e1"}, a.called())
			}
		})
	}
}

// deadRemote is a remote side that keeps each idempotency key's effect,
// and answers reconciliations from them.
type deadRemote struct {
	mu      sync.Mutex
	applied map[string]int
}

func (r *deadRemote) apply(key string) {
	r.mu.Lock()
	r.applied[key]++
	r.mu.Unlock()
}

func (r *deadRemote) total() (n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.applied {
		n += c
	}
	return n
}

func (r *deadRemote) reconcile(_ context.Context, e effects.Effect) (effects.Reconciliation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return effects.Reconciliation{Applied: r.applied[e.IdempotencyKey] > 0, Ref: "ref"}, nil
}

// A decider that dies with its call (its process froze or was killed
// after the request left) leaves a pending ledger row and a claim that
// runs out. Past the business deadline, a copy of its event must not end
// it expired when the call took effect: the call is reconciled and the
// event applies. When the call never reached the remote side, the
// reconciliation says so and the event ends expired, with no new call
// past its deadline; unless an earlier call of the same Decide took
// effect (planned): then it is a dead letter for an operator.
func TestDeadCallersCallPastTheDeadlineIsResolvedNotExpired(t *testing.T) {
	for _, tc := range []struct {
		reached, planned bool
		want             string
	}{
		{true, false, "e1:applied"},
		{false, false, "e1:expired"},
		{false, true, "e1:dead_lettered"},
	} {
		t.Run(fmt.Sprintf("reached=%v,planned=%v", tc.reached, tc.planned), func(t *testing.T) {
			b := setup(t)
			clock := newFoundClock()
			remote := &deadRemote{applied: map[string]int{}}
			ledger, err := effects.New(b.store, effects.Config{Now: clock.Now, Reconcile: remote.reconcile,
				Timeout: time.Minute, Heartbeat: 20 * time.Millisecond})
			require.NoError(t, err)
			sent, frozen := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			b.cfg.Now, b.cfg.MaxAge, b.cfg.ClaimHeartbeat = clock.Now, time.Hour, 20*time.Millisecond
			b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
				if tc.planned {
					if _, err := ledger.Do(ctx, "plan", func(_ context.Context, key string) (string, error) {
						remote.apply(key)
						return "plan", nil
					}); err != nil {
						return nil, err
					}
				}
				ref, err := ledger.Do(ctx, "refund", func(ctx context.Context, key string) (string, error) {
					if calls.Add(1) == 1 {
						// The first caller: its request reaches the remote
						// side or not, and then its process stops for good.
						if tc.reached {
							remote.apply(key)
						}
						close(sent)
						<-frozen
						return "", errors.New("the process is gone")
					}
					remote.apply(key)
					return "ref", nil
				})
				return []byte(ref), err
			}
			first, other := b.consumer(t), b.consumer(t) // two processes
			ev := timed("e1", 1, clock.Now().Add(-50*time.Minute), "")

			ctx, die := context.WithCancel(context.Background())
			gone := make(chan struct{})
			go func() {
				defer close(gone)
				_, _ = first.Deliver(ctx, ev, 1)
			}()
			defer func() { close(frozen); <-gone }()
			<-sent
			die() // its heartbeats stop: the claim and the ledger's lease run out unrenewed
			clock.Advance(20 * time.Minute)

			results := mustDeliver(t, other, ev, 2)
			if !tc.reached {
				// Uncertain, and the call may still be running at the remote
				// side: asked again once the ledger's Timeout has passed.
				require.Equal(t, []string{"e1:retry"}, outcomes(results), results[0].Reason)
				clock.Advance(2 * time.Minute)
				results = mustDeliver(t, other, ev, 3)
			}
			require.Equal(t, []string{tc.want}, outcomes(results), results[0].Reason)
			require.Equal(t, int32(1), calls.Load(), "no new call past the deadline")
			want := map[bool]int{true: 1}[tc.reached] + map[bool]int{true: 1}[tc.planned]
			require.Equal(t, want, remote.total())
		})
	}
}
