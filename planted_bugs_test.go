package seqbox_test

// Deterministic tests written for planted bugs that too few checks caught
// (issue 36 item 9; the table of bug classes, the checks that catch each
// and their times is docs/mutation.md). Each fails with its bug planted
// and passes without.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

func unkeyedWithBusinessKey(id, bk string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","businesskey":%q}`, id, bk)
}

// An unkeyed event (no partitionkey) whose business key another identity
// is being decided for waits for it, as a keyed one does, and ends a
// semantic duplicate without reaching the model; and an unkeyed event
// being decided makes a keyed one of its business key wait.
func TestUnkeyedEventWaitsForABusinessKeyInFlight(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, next []byte
	}{
		{"unkeyed behind keyed", withBusinessKey("a", "k1", "followup:1"), unkeyedWithBusinessKey("b", "followup:1")},
		{"keyed behind unkeyed", unkeyedWithBusinessKey("a", "followup:1"), withBusinessKey("b", "k2", "followup:1")},
		{"unkeyed behind unkeyed", unkeyedWithBusinessKey("a", "followup:1"), unkeyedWithBusinessKey("b", "followup:1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			a := newAgent()
			release := make(chan struct{})
			a.block["a"] = release
			b.cfg.Decide = a.decide
			c := b.consumer(t)
			ctx := context.Background()
			first := make(chan []seqboxtype.Result, 1)
			go func() {
				results, err := c.Deliver(ctx, tc.first, 1)
				require.NoError(t, err)
				first <- results
			}()
			require.Equal(t, "a", <-a.started)
			results, err := c.Deliver(ctx, tc.next, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"b:retry"}, outcomes(results), "b must wait while a, of its business key, is decided: %s", results[0].Reason)
			require.Contains(t, results[0].Reason, `business key "followup:1" is being decided`, "b waits for the business key, not for a claim of its own")
			require.Equal(t, []string{"a"}, a.called(), "b reached the model while a, of its business key, was being decided")
			close(release)
			require.Equal(t, []string{"a:applied"}, outcomes(<-first))
			results, err = c.Deliver(ctx, tc.next, 2)
			require.NoError(t, err)
			require.Equal(t, []string{"b:semantic_duplicate"}, outcomes(results))
			require.Equal(t, []string{"a"}, a.called())
		})
	}
}

// A message whose handler failed transiently is not acknowledged in its
// batch's transaction (the embedded queue in the store's own file acks
// there): it stays at the broker, leased until its nack, and applies on
// its redelivery. Acked with the batch, it would be gone for good while
// its retry row waits for a redelivery that never comes.
func TestRetriedMessageStaysAtTheBrokerWithAnAckInTheTransaction(t *testing.T) {
	b := setup(t)
	q := openQueue(t, b.path, 30*time.Second) // the store's own file: acks go in the batch's transaction
	var calls atomic.Int32
	record := replay.RecordHandler(b.cfg.Name)
	b.cfg.Transport, b.cfg.Logger = q, quietLogger
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if calls.Add(1) == 1 {
			return errors.New("the CRM answered 503")
		}
		return record(ctx, tx, ev)
	}
	type seen struct {
		outcome seqboxtype.Outcome
		depth   int
	}
	results := make(chan seen, 16)
	b.cfg.Observer = func(res seqboxtype.Result) {
		// Told right after the commit, before the delivery is settled.
		results <- seen{res.Outcome, unacked(t, q)}
	}
	publishTasks(t, q, "m")
	c := b.consumer(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	first := <-results
	require.Equal(t, seqboxtype.Retry, first.outcome)
	require.Equal(t, 1, first.depth, "a retried message was acknowledged with its batch: nothing will redeliver it")
	require.Equal(t, seqboxtype.Applied, (<-results).outcome)
	require.Equal(t, 1, b.effects(t, "m"))
}

// Without Decide too, a message that failed transiently holds its key's
// turn while it retries: the key's next event, versioned or not, parks
// behind it instead of overtaking it, and applies after it.
func TestRetryingMessageHoldsItsTurnWithoutDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v1, v2 []byte
	}{
		{"first versions of a new key", keyed("v1", "opp", 1), keyed("v2", "opp", 2)},
		{"no objectversion", unversioned("v1", "opp"), unversioned("v2", "opp")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			var calls atomic.Int32
			record := replay.RecordHandler(b.cfg.Name)
			var applied []string
			b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
				if ev.ID == "v1" && calls.Add(1) == 1 {
					return errors.New("the CRM answered 503")
				}
				applied = append(applied, ev.ID)
				return record(ctx, tx, ev)
			}
			c := b.consumer(t)
			ctx := context.Background()
			results, err := c.Deliver(ctx, tc.v1, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"v1:retry"}, outcomes(results))
			results, err = c.Deliver(ctx, tc.v2, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"v2:held"}, outcomes(results), "v2 must wait behind v1, which is retrying: %s", results[0].Reason)
			results, err = c.Deliver(ctx, tc.v1, 2)
			require.NoError(t, err)
			require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(results))
			require.Equal(t, []string{"v1", "v2"}, applied)
		})
	}
}

// An operator's skip of a dead letter whose redrive is being decided right
// now is refused with ErrBeingDecided: the dead letter stays unresolved,
// the redrive applies its message, and only then does the blocked
// successor reach the model. A skip that went through would let the
// successor reach the agent while its predecessor is there.
func TestSkipIsRefusedWhileTheRedriveIsDecided(t *testing.T) {
	b := setup(t)
	a := newAgent()
	var refuse sync.Map
	refuse.Store("v1", true)
	b.cfg.Decide = refusing(a, &refuse)
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"v1:dead_lettered"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 1)))
	require.Equal(t, []string{"v2:blocked"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	refuse.Delete("v1")
	release := make(chan struct{})
	a.mu.Lock()
	a.block["v1"] = release
	a.mu.Unlock()
	redriven := make(chan []seqboxtype.Result, 1)
	go func() {
		results, err := c.Redrive(ctx, letters[0].Seq)
		require.NoError(t, err)
		redriven <- results
	}()
	require.Equal(t, "v1", <-a.started, "the redrive is at the agent")
	_, err = c.Skip(ctx, letters[0].Seq, "alice", "gave up waiting")
	require.ErrorIs(t, err, seqbox.ErrBeingDecided, "a skip while the redrive is being decided")
	close(release)
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-redriven))
	require.Equal(t, []string{"v1", "v2"}, a.called())
}

// A batch whose optimistic run has to undo one delivery (its handler
// failed) runs again with savepoints; in that run every other delivery is
// recorded in the inbox as in the first: a redelivery of one of them is a
// duplicate, and its handler ran once.
func TestBatchRerunRecordsEveryIdentity(t *testing.T) {
	b := setup(t)
	record := replay.RecordHandler(b.cfg.Name)
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if ev.ID == "m2" {
			return errors.New("the CRM answered 503")
		}
		return record(ctx, tx, ev)
	}
	c := b.consumer(t)
	ctx := context.Background()
	out, err := c.DeliverBatch(ctx, [][]byte{unversioned("m1", "a"), unversioned("m2", "b"), unversioned("m3", "c")})
	require.NoError(t, err)
	require.Equal(t, []string{"m1:applied"}, outcomes(out[0]))
	require.Equal(t, []string{"m2:retry"}, outcomes(out[1]))
	require.Equal(t, []string{"m3:applied"}, outcomes(out[2]))
	for _, id := range []string{"m1", "m3"} {
		results, err := c.Deliver(ctx, unversioned(id, map[string]string{"m1": "a", "m3": "c"}[id]), 2)
		require.NoError(t, err)
		require.Equal(t, []string{id + ":duplicate"}, outcomes(results), "%s was applied in the batch's rerun: its identity must be in the inbox", id)
		require.Equal(t, 1, b.effects(t, id))
	}
	require.Equal(t, int64(2), b.inboxRows(t), "m1 and m3; m2, retrying, has none yet")
}

// An identity is kept for Retention, not for the broker's redelivery
// window only: purged once that window is over, a dead letter redriven
// within DLQRetention+RedriveWindow, or a copy a slow producer re-sends,
// would look new and apply twice. Past the redelivery window (and before
// Retention) the purge leaves it, and a copy is a duplicate; past
// Retention it is gone.
func TestRetentionKeepsIdentitiesPastTheRedeliveryWindow(t *testing.T) {
	b := setup(t)
	clock := newFoundClock()
	b.cfg.Now = clock.Now
	b.cfg.RedeliveryWindow = time.Hour
	b.cfg.DLQRetention, b.cfg.RedriveWindow = 12*time.Hour, 12*time.Hour
	b.cfg.Retention = 48 * time.Hour
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"m:applied"}, outcomes(mustDeliver(t, c, unversioned("m", "opp"), 1)))
	clock.Advance(25 * time.Hour) // past the redelivery window, within Retention
	n, err := c.Purge(ctx, 100)
	require.NoError(t, err)
	require.Zero(t, n, "an identity purged within Retention")
	require.Equal(t, []string{"m:duplicate"}, outcomes(mustDeliver(t, c, unversioned("m", "opp"), 2)))
	require.Equal(t, 1, b.effects(t, "m"))
	clock.Advance(24 * time.Hour) // past Retention
	n, err = c.Purge(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// A decision is bound to its payload in a batch too: copy 1 was decided
// and its handler failed (its decision stays recorded); copy 2, with
// another payload, comes first in a batch that also holds copy 1 again.
// Copy 2 is a collision, copy 1 applies with the decision made for it,
// and the handler never sees copy 2's payload.
func TestDecisionIsBoundToItsPayloadInABatch(t *testing.T) {
	b := setup(t)
	a := &payloadAgent{}
	apps := &applications{failFirst: map[string]bool{"r1": true}}
	b.cfg.Decide, b.cfg.Handler = a.decide, apps.handler
	c := b.consumer(t)
	ctx := context.Background()
	results, err := c.Deliver(ctx, refund("r1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:retry"}, outcomes(results), results[0].Reason)
	out, err := c.DeliverBatch(ctx, [][]byte{refund("r1", 1000), refund("r1", 10)})
	require.NoError(t, err)
	require.Equal(t, []string{"r1:collision"}, outcomes(out[0]), "copy 2 carries another payload than the decision was made for: %s", out[0][0].Reason)
	require.Equal(t, []string{"r1:applied"}, outcomes(out[1]), out[1][0].Reason)
	require.Equal(t, []string{`r1 data={"amount":10} decision=refund decided on {"amount":10}`}, apps.list())
	require.Equal(t, []string{`{"amount":10}`}, a.seen())
}

// A turn is bound to its payload: copy 1's decision failed (the model
// answered 503), so its turn stays, bound to copy 1's payload, with no
// decision recorded. Copy 2, with another payload, is a collision: it
// takes no turn of its own, and the model is never asked about it.
func TestTurnIsBoundToItsPayloadAfterAFailedDecision(t *testing.T) {
	b := setup(t)
	a := &payloadAgent{}
	var failed atomic.Bool
	apps := &applications{}
	b.cfg.Handler = apps.handler
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		if !failed.Swap(true) {
			return nil, errors.New("503 from the model")
		}
		return a.decide(ctx, ev)
	}
	c := b.consumer(t)
	ctx := context.Background()
	results, err := c.Deliver(ctx, refund("r1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:retry"}, outcomes(results), results[0].Reason)
	results, err = c.Deliver(ctx, refund("r1", 1000), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:collision"}, outcomes(results), "copy 2 carries another payload than the turn was taken for: %s", results[0].Reason)
	require.Empty(t, a.seen(), "the model was asked about copy 2")
	results, err = c.Deliver(ctx, refund("r1", 10), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:applied"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{`{"amount":10}`}, a.seen())
	require.Equal(t, []string{`r1 data={"amount":10} decision=refund decided on {"amount":10}`}, apps.list())
}

// The sweep's way out for a turn (turn_end.go) is for a message gone for
// good, never for one being decided: with the clock past the redelivery
// window and the successor's hold, while v1 is still at the model under a
// live claim, the sweep leaves v1's turn and v2 stays behind it. (Clock
// injected through Config.Now; the claim's heartbeat is an hour, so its
// life, three heartbeats, is what keeps it.)
func TestSweepKeepsATurnWhoseClaimIsLive(t *testing.T) {
	b := setup(t)
	clock := newFoundClock()
	a := newAgent()
	release := make(chan struct{})
	a.block["v1"] = release
	b.cfg.Decide, b.cfg.Now = a.decide, clock.Now
	b.cfg.ClaimHeartbeat = time.Hour
	b.cfg.RedeliveryWindow, b.cfg.DLQRetention, b.cfg.RedriveWindow, b.cfg.Retention = time.Hour, 12*time.Hour, 12*time.Hour, 48*time.Hour
	b.cfg.HoldTimeout = 30 * time.Minute
	c := b.consumer(t)
	ctx := context.Background()
	done := make(chan []seqboxtype.Result, 1)
	go func() { done <- mustDeliver(t, c, unversioned("v1", "opp"), 1) }()
	require.Equal(t, "v1", <-a.started)
	require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, unversioned("v2", "opp"), 1)))
	clock.Advance(2 * time.Hour) // past the window and v2's hold; v1's claim lives 3h
	swept, err := c.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, outcomes(swept), "the sweep touched the key of a message being decided")
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Empty(t, letters, "a dead letter for a message being decided")
	close(release)
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-done), "v1's turn was ended while it was being decided: its decision is lost")
}

// A versioned semantic duplicate still moves its key to its version (only
// the effect is suppressed): the key's successors are not held behind it,
// and a later copy of that version under another identity is stale, not
// the key's new baseline. (Kills a mutation survivor of apply.go;
// docs/mutation.md.)
func TestSemanticDuplicateMovesItsKeysVersion(t *testing.T) {
	b := setup(t)
	a := newAgent()
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	require.Equal(t, []string{"a:applied"}, outcomes(mustDeliver(t, c, keyedBK("a", "k1", 1, "followup:1"), 1)))
	require.Equal(t, []string{"b:semantic_duplicate"}, outcomes(mustDeliver(t, c, keyedBK("b", "k2", 5, "followup:1"), 1)))
	require.Equal(t, []string{"late:stale"}, outcomes(mustDeliver(t, c, keyed("late", "k2", 4), 1)),
		"k2 moved to version 5 with its semantic duplicate")
	require.Equal(t, []string{"next:applied"}, outcomes(mustDeliver(t, c, keyed("next", "k2", 6), 1)))
	require.Equal(t, []string{"a", "next"}, a.called())
}

// A message delivered more than four times its attempts without ever
// settling (each attempt killed its process before a failure could be
// recorded) is dead-lettered as a crash loop instead of being run again;
// one at exactly that bound still runs. (Kills the mutation survivors of
// apply.go's crash-loop guard; docs/mutation.md.)
func TestCrashLoopIsDeadLettered(t *testing.T) {
	b := setup(t) // MaxAttempts 3: the bound is 12 deliveries
	c := b.consumer(t)
	results := mustDeliver(t, c, unversioned("at-bound", "k1"), 12)
	require.Equal(t, []string{"at-bound:applied"}, outcomes(results), results[0].Reason)
	results = mustDeliver(t, c, unversioned("looping", "k2"), 13)
	require.Equal(t, []string{"looping:dead_lettered"}, outcomes(results))
	require.Contains(t, results[0].Reason, "without settling")
	require.Zero(t, b.effects(t, "looping"))
}

// An unkeyed message that failed and then applied leaves no retry row
// behind: its attempts are over. (Kills a mutation survivor of apply.go,
// whose RetryClear ran for keyed messages only; docs/mutation.md.)
func TestUnkeyedRetryIsClearedWhenItApplies(t *testing.T) {
	b := setup(t)
	var calls atomic.Int32
	record := replay.RecordHandler(b.cfg.Name)
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if calls.Add(1) == 1 {
			return errors.New("the CRM answered 503")
		}
		return record(ctx, tx, ev)
	}
	c := b.consumer(t)
	msg := []byte(`{"id":"u","source":"crm","type":"t"}`)
	require.Equal(t, []string{"u:retry"}, outcomes(mustDeliver(t, c, msg, 1)))
	require.Equal(t, []string{"u:applied"}, outcomes(mustDeliver(t, c, msg, 2)))
	var n int
	require.NoError(t, b.store.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_retries WHERE consumer = $1`, b.cfg.Name).Scan(&n))
	require.Zero(t, n, "the applied message's retry row was left behind")
}
