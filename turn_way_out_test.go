package seqbox_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Class 4 of issue 36: an event holding its key's turn is never delivered
// again (the broker dropped it, a Deliver caller gave up). Its successors
// must not stay held for good: past the broker's redelivery window, with
// no live claim, the turn is covered by hold expiry.
func TestTurnNeverRedeliveredIsCoveredByHoldExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		v1   []byte
		v2   []byte
	}{
		{"versioned", keyed("v1", "opp", 1), keyed("v2", "opp", 2)},
		{"unversioned", unversioned("v1", "opp"), unversioned("v2", "opp")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			a := newAgent()
			a.fail["v1"] = 1
			clock := newFoundClock()
			b.cfg.Now, b.cfg.Decide = clock.Now, a.decide
			b.cfg.HoldExpiry, b.cfg.HoldTimeout = seqbox.HoldExpiryAdvance, time.Minute
			b.cfg.RedeliveryWindow = time.Hour
			c := b.consumer(t)
			require.Equal(t, []string{"v1:retry"}, outcomes(mustDeliver(t, c, tc.v1, 1)))
			require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, tc.v2, 1)))

			// Within the redelivery window the turn holds: v1 may come back.
			clock.Advance(2 * time.Minute)
			results, err := c.Sweep(context.Background())
			require.NoError(t, err)
			require.Empty(t, results, "v1 may still be redelivered: its turn holds")

			// Past it, v1 never came back: the hold expires over it.
			clock.Advance(time.Hour)
			results, err = c.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, []string{"v2:applied"}, outcomes(results), "v2 was held for good behind a turn nobody will end")
			require.Equal(t, []string{"v1", "v2"}, a.called())

			// v1 coming back after all does not apply after its successor.
			results = mustDeliver(t, c, tc.v1, 2)
			require.Len(t, results, 1)
			require.NotEqual(t, seqboxtype.Applied, results[0].Outcome, results[0].Reason)
			require.Equal(t, []string{"v1", "v2"}, a.called(), "v1 does not reach the agent after v2")
		})
	}
}

// Class 4, by hand: an operator ends a turn that will never come back with
// keys release, naming who and why; the successors go, and the ended
// message shows in the DLQ as skipped with that reason.
func TestOperatorReleasesAKeyHeldBehindADeadTurn(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.fail["v1"] = 1
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"v1:retry"}, outcomes(mustDeliver(t, c, unversioned("v1", "opp"), 1)))
	require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, unversioned("v2", "opp"), 1)))

	_, err := c.ReleaseKey(ctx, "opp", "", "")
	require.Error(t, err, "who and why are required")
	results, err := c.ReleaseKey(ctx, "opp", "ops", "v1 was dropped by the broker")
	require.NoError(t, err)
	require.Equal(t, []string{"v2:applied"}, outcomes(results))

	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name, All: true})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, "v1", letters[0].ID)
	require.Equal(t, seqboxtype.DeadLetterSkipped, letters[0].State)
	require.Contains(t, letters[0].Resolution, "ops: v1 was dropped by the broker")

	_, err = c.ReleaseKey(ctx, "opp", "ops", "again")
	require.Error(t, err, "nothing holds the key any more")
	results = mustDeliver(t, c, unversioned("v1", "opp"), 2)
	require.NotEqual(t, seqboxtype.Applied, results[0].Outcome, "v1 ended by the operator does not apply after v2: %s", results[0].Reason)
}

// A turn whose message is being decided right now is not ended by an
// operator's release: the call may be reaching the agent.
func TestReleaseRefusesATurnBeingDecided(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.block["v1"] = make(chan struct{})
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	done := make(chan []seqboxtype.Result, 1)
	go func() { done <- mustDeliver(t, c, unversioned("v1", "opp"), 1) }()
	require.Equal(t, "v1", <-a.started)
	require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, unversioned("v2", "opp"), 1)))
	_, err := c.ReleaseKey(ctx, "opp", "ops", "impatient")
	require.ErrorIs(t, err, seqbox.ErrBeingDecided)
	close(a.block["v1"])
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-done))
}

// Found by the model (issue 36): an event with no partition key but a
// business key, lost while it holds its turn, held that business key for
// good; no key's hold covers it. Past the redelivery window the sweep ends
// its turn, and the other identity of the business key goes ahead.
func TestLostUnkeyedTurnFreesItsBusinessKey(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.fail["u1"], a.fail["u2"] = 1, 1
	clock := newFoundClock()
	b.cfg.Now, b.cfg.Decide, b.cfg.RedeliveryWindow = clock.Now, a.decide, time.Hour
	c := b.consumer(t)
	unkeyedBK := func(id string) []byte {
		return []byte(`{"id":"` + id + `","source":"crm","type":"t","businesskey":"refund:9"}`)
	}
	require.Equal(t, []string{"u1:retry"}, outcomes(mustDeliver(t, c, unkeyedBK("u1"), 1)))
	// u2, another lost unkeyed turn: one sweep ends both.
	require.Equal(t, []string{"u2:retry"}, outcomes(mustDeliver(t, c, []byte(`{"id":"u2","source":"crm","type":"t","businesskey":"refund:10"}`), 1)))
	results := mustDeliver(t, c, withBusinessKey("k1", "opp", "refund:9"), 1)
	require.Equal(t, []string{"k1:retry"}, outcomes(results), "k1 waits for u1, which holds refund:9: %s", results[0].Reason)

	// u1 never comes back; k1 does, on its backoff, and waits again.
	clock.Advance(50 * time.Minute)
	results = mustDeliver(t, c, withBusinessKey("k1", "opp", "refund:9"), 2)
	require.Equal(t, []string{"k1:retry"}, outcomes(results), results[0].Reason)
	clock.Advance(20 * time.Minute) // past u1's redelivery window, not k1's
	_, err := c.Sweep(context.Background())
	require.NoError(t, err)
	results = mustDeliver(t, c, withBusinessKey("k1", "opp", "refund:9"), 3)
	require.Equal(t, []string{"k1:applied"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{"u1", "u2", "k1"}, a.called())
	letters, err := b.store.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: b.cfg.Name, All: true})
	require.NoError(t, err)
	var ended []string
	for _, l := range letters {
		require.Equal(t, seqboxtype.DeadLetterSkipped, l.State, l.ID)
		ended = append(ended, l.ID)
	}
	require.ElementsMatch(t, []string{"u1", "u2"}, ended, "one sweep ends every lost turn it finds")
	// The audit says so, as it says every outcome.
	audit, err := b.store.Executor().AuditList(context.Background(), store.AuditListParams{Consumer: b.cfg.Name, Limit: 100})
	require.NoError(t, err)
	var audited []string
	for _, row := range audit {
		if row.Outcome == seqboxtype.DeadLettered && strings.Contains(row.Reason, "its key's turn was ended by sweep") {
			audited = append(audited, row.ID)
		}
	}
	require.ElementsMatch(t, []string{"u1", "u2"}, audited, "each ended turn is in the audit")
}

// A message that failed in a batch on a key new to the store held its
// key's turn by a retry row with no key row: the failed attempt's key
// row rolled back with it, and `keys release` answered `key "k2": not
// found`, so the operator could not end the turn (TestBatchMatchesOneByOne
// found it; one by one, the key's row stood). A turn's key has its row.
func TestTurnOnANewKeyCanBeReleased(t *testing.T) {
	for _, c := range bothStores {
		for _, batch := range [][]string{{"k2-v2"}, {"u-1", "k2-v2"}} {
			t.Run(c.name+"/"+strings.Join(batch, ","), func(t *testing.T) {
				ctx := context.Background()
				b := c.bundle(t)
				b.cfg.Handler = func(_ context.Context, _ seqbox.Tx, ev seqboxtype.Event) error {
					if ev.ID == "k2-v2" {
						return errors.New("fails")
					}
					return nil
				}
				cons := b.consumer(t)
				raws := map[string][]byte{"u-1": []byte(`{"id":"u-1","source":"crm","type":"t"}`), "k2-v2": keyed("k2-v2", "k2", 2)}
				var in [][]byte
				for _, id := range batch {
					in = append(in, raws[id])
				}
				out, err := cons.DeliverBatch(ctx, in)
				require.NoError(t, err)
				require.Equal(t, seqboxtype.Retry, out[len(out)-1][0].Outcome, "k2-v2 fails and holds its key's turn")
				_, err = cons.ReleaseKey(ctx, "k2", "ops", "test")
				require.NoError(t, err, "the operator ends the turn")
				require.Equal(t, "dead_lettered", outcomeOf(t, b, "k2-v2"), "the turn's holder is recorded a dead letter")
			})
		}
	}
}

// A database written before that fix can hold such a turn: `keys
// release` still ends it.
func TestTurnWithoutItsKeyRowCanBeReleased(t *testing.T) {
	for _, c := range bothStores {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			b := c.bundle(t)
			b.cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error { return errors.New("fails") }
			cons := b.consumer(t)
			require.Equal(t, []string{"k2-v2:retry"}, outcomes(mustDeliver(t, cons, keyed("k2-v2", "k2", 2), 1)))
			// As a store written before pipeline.rollback leaves it.
			_, err := b.store.DB().ExecContext(ctx, `DELETE FROM seqbox_keys WHERE consumer = $1 AND partitionkey = 'k2'`, b.cfg.Name)
			require.NoError(t, err)
			_, err = cons.ReleaseKey(ctx, "k2", "ops", "test")
			require.NoError(t, err, "the operator ends the turn")
			require.Equal(t, "dead_lettered", outcomeOf(t, b, "k2-v2"))
			_, err = cons.ReleaseKey(ctx, "nokey", "ops", "test")
			require.ErrorIs(t, err, store.ErrNotFound, "a key with no row and no turn is not found")
		})
	}
}

// comeBack is a store whose DecisionClaimLive of identity id, once armed,
// runs back after it answers: between the sweep's last read of a stale
// turn (deadTurn) and the transaction that ends it.
type comeBack struct {
	wrapped
	id    string
	armed *atomic.Bool
	back  func()
}

func (s comeBack) Executor() store.Executor {
	return comeBackExecutor{Executor: s.Store.Executor(), s: s}
}

type comeBackExecutor struct {
	store.Executor
	s comeBack
}

func (e comeBackExecutor) DecisionClaimLive(ctx context.Context, p store.DecisionClaimParams) (bool, error) {
	live, err := e.Executor.DecisionClaimLive(ctx, p)
	if p.ID == e.s.id && e.s.armed.CompareAndSwap(true, false) {
		e.s.back()
	}
	return live, err
}

// The sweep reads a stale unkeyed turn (not seen for the redelivery
// window, no decision claim alive) and then ends it in a transaction of
// its own. Should the message come back and apply in between (another
// worker got its redelivery), the turn is gone by the time the sweep's
// transaction runs: the sweep leaves it, and the applied message is not
// turned into a skipped dead letter. Covers the window between
// endStaleTurns' read and its transaction (the TurnHeld re-check in it).
func TestTheSweepLeavesATurnWhoseMessageCameBackAndApplied(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.fail["u1"] = 1
	clock := newFoundClock()
	var armed atomic.Bool
	u1 := []byte(`{"id":"u1","source":"crm","type":"t","businesskey":"refund:9"}`)
	var c *seqbox.Consumer
	var cameBack []seqboxtype.Result
	b.cfg.Now, b.cfg.Decide, b.cfg.RedeliveryWindow = clock.Now, a.decide, time.Hour
	b.cfg.Store = comeBack{wrapped: wrapped{b.store}, id: "u1", armed: &armed, back: func() {
		cameBack = mustDeliver(t, c, u1, 2) // its redelivery, after all
	}}
	c = b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"u1:retry"}, outcomes(mustDeliver(t, c, u1, 1)))

	clock.Advance(time.Hour + time.Minute) // past its redelivery window
	armed.Store(true)
	swept, err := c.Sweep(ctx)
	require.NoError(t, err)
	require.False(t, armed.Load(), "the sweep looked at u1's turn")
	require.Equal(t, []string{"u1:applied"}, outcomes(cameBack), "u1 came back between the sweep's read and its transaction")
	require.Empty(t, outcomes(swept))

	seen, err := b.store.Executor().InboxSeen(ctx, store.MessageRef{Consumer: b.cfg.Name, Source: "crm", ID: "u1"})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, seen.Outcome, "the sweep ended the turn of a message that had applied meanwhile")
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name, All: true})
	require.NoError(t, err)
	require.Empty(t, letters, "an applied message was recorded as a skipped dead letter")
	require.Equal(t, 1, b.effects(t, "u1"))
	require.Equal(t, []string{"u1", "u1"}, a.called())
}
