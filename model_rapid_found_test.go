package seqbox_test

// The library bugs TestRapidModel (model_rapid_test.go) found, each cut
// down to a deterministic test of its own: Deliver, Sweep and the operator
// actions driven by hand on a clock the test sets. Each asserts what the
// contract (docs/design.md, "Outcomes" and "The agent path") asks
// for. All six are fixed, and their tests guard the fixes.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// newFoundClock is the found cases' clock, at their start.
func newFoundClock() *testclock.Clock {
	return testclock.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
}

// refusing is a Decide that refuses the ids in refuse for good, and asks
// a otherwise.
func refusing(a *agent, refuse *sync.Map) seqbox.Decider {
	return func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		if _, ok := refuse.Load(ev.ID); ok {
			return nil, seqbox.Permanent(errors.New("refused"))
		}
		return a.decide(ctx, ev)
	}
}

func keyedBK(id, key string, v int, bk string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","partitionkey":%q,"objectversion":%d,"businesskey":%q}`, id, key, v, bk)
}

func mustDeliver(t *testing.T, c *seqbox.Consumer, raw []byte, attempt int) []seqboxtype.Result {
	t.Helper()
	results, err := c.Deliver(context.Background(), raw, attempt)
	require.NoError(t, err)
	return results
}

func outcomeOf(t *testing.T, b *bundle, id string) string {
	t.Helper()
	var o string
	require.NoError(t, b.store.DB().QueryRow(`SELECT outcome FROM seqbox_inbox WHERE consumer = $1 AND id = $2`, b.cfg.Name, id).Scan(&o))
	return o
}

// Bug 1 (fixed by 958ddf7: the decider looks at the business key again
// just before it asks). Two identities asking for one business key take
// their turns with equal timestamps (a fixed Config.Now, as replay --now has; clocks a
// little apart on two machines; synctest's clock). The first is decided;
// on its rerun BusinessKeyInFlight breaks the first_at tie by id and makes
// it wait behind the second, which then goes ahead and is decided too:
// the agent is asked twice for one effect (the remote side makes it
// twice), while the database shows one applied and one semantic_duplicate.
func TestRapidFoundBusinessKeyTieAsksTheAgentTwice(t *testing.T) {
	b := setup(t)
	a := newAgent()
	clock := newFoundClock()
	b.cfg.Now, b.cfg.Decide = clock.Now, a.decide
	c := b.consumer(t)
	out, err := c.DeliverBatch(context.Background(), [][]byte{withBusinessKey("b", "k1", "followup:1"), withBusinessKey("a", "k2", "followup:1")})
	require.NoError(t, err)
	t.Log(outcomes(out[0]), outcomes(out[1]))
	for attempt := 2; attempt <= 3; attempt++ {
		t.Log(outcomes(mustDeliver(t, c, withBusinessKey("a", "k2", "followup:1"), attempt)))
		t.Log(outcomes(mustDeliver(t, c, withBusinessKey("b", "k1", "followup:1"), attempt)))
	}
	require.Len(t, a.called(), 1, "one business key reached the agent under two identities: %v", a.called())
}

// Bug 2a (fixed by 0804773: no hold expiry over a turn). A successor held behind a retrying turn holder is treated as a
// version gap when its hold times out: with HoldExpiry=advance the sweep
// records a gap over version 1, which is present and retrying with
// attempts left; v2 reaches the agent before v1 has a final outcome, and
// v1's redelivery is parked as version_conflict, "already committed under
// another identity", which is false.
func TestRapidFoundHoldExpiryAdvancesOverARetryingTurn(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.fail["v1"] = 1
	clock := newFoundClock()
	b.cfg.Now, b.cfg.Decide = clock.Now, a.decide
	b.cfg.HoldExpiry, b.cfg.HoldTimeout, b.cfg.Retry.MaxAttempts = seqbox.HoldExpiryAdvance, time.Minute, 5
	c := b.consumer(t)
	require.Equal(t, []string{"v1:retry"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 1)))
	require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	clock.Advance(2 * time.Minute)
	_, err := c.Sweep(context.Background())
	require.NoError(t, err)
	results := mustDeliver(t, c, keyed("v1", "opp", 1), 2)
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(results), "v1 holds its key's turn while it retries: %s", results[0].Reason)
}

// Bug 2b (fixed by 0804773). The same with HoldExpiry=block: the sweep blocks the key for a
// gap "before version 2" while version 1 is present and retrying; v1's
// own redelivery is then parked as blocked behind that gap (a block
// waiting for itself), and an unkeyed event asking for v1's business key
// waits for v1 forever, without an attempt ever counted.
func TestRapidFoundHoldExpiryBlocksTheTurnHolder(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.fail["v1"] = 1
	clock := newFoundClock()
	first := int64(1)
	b.cfg.Now, b.cfg.Decide, b.cfg.FirstVersion = clock.Now, a.decide, &first
	b.cfg.HoldTimeout, b.cfg.Retry.MaxAttempts = time.Minute, 5
	c := b.consumer(t)
	require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	require.Equal(t, []string{"v1:retry"}, outcomes(mustDeliver(t, c, keyedBK("v1", "opp", 1, "bk0"), 1)))
	clock.Advance(2 * time.Minute)
	_, err := c.Sweep(context.Background())
	require.NoError(t, err)
	results := mustDeliver(t, c, keyedBK("v1", "opp", 1, "bk0"), 2)
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(results), "v1 holds its key's turn while it retries: %s", results[0].Reason)
	require.Equal(t, []string{"dup:semantic_duplicate"}, outcomes(mustDeliver(t, c, withBusinessKey("dup", "", "bk0"), 1)))
}

// Bug 3 (fixed by 0804773: stale when a recorded gap passed over it).
// OnDeadLetter=release records a gap at the dead letter's version;
// redriving the dead letter then finds its version equal to the key's and
// parks it as version_conflict, "already committed under another
// identity", which is false (with a successor applied, the same redrive
// is stale).
func TestRapidFoundRedriveAfterReleaseIsAVersionConflict(t *testing.T) {
	b := setup(t)
	a := newAgent()
	var refuse sync.Map
	refuse.Store("v2", true)
	b.cfg.Decide, b.cfg.OnDeadLetter = refusing(a, &refuse), seqbox.DeadLetterRelease
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"v1:applied"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 1)))
	require.Equal(t, []string{"v2:dead_lettered"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	refuse.Delete("v2")
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	results, err := c.Redrive(ctx, letters[0].Seq)
	require.NoError(t, err)
	require.NotEqual(t, seqboxtype.VersionConflict, results[0].Outcome, "no other identity carries version 2: %s", results[0].Reason)
}

// Bug 4 (fixed by 0804773: ErrBeingDecided). Skip resolves a dead letter whose redrive is still running (at
// the agent): it clears the redriven message's turn, unblocks the key and
// lets its successor reach the agent at the same time; the redrive then
// fails with "already resolved" although its decision was made.
func TestRapidFoundSkipDuringARedrive(t *testing.T) {
	b := setup(t)
	a := newAgent()
	var refuse sync.Map
	refuse.Store("e1", true)
	b.cfg.Decide = refusing(a, &refuse)
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"e1:dead_lettered"}, outcomes(mustDeliver(t, c, unversioned("e1", "opp"), 1)))
	require.Equal(t, []string{"e2:blocked"}, outcomes(mustDeliver(t, c, unversioned("e2", "opp"), 1)))
	seq, release, done := redriveHeldAtTheAgent(t, b, c, a, &refuse, "e1")
	_, _ = c.Skip(ctx, seq, "alice", "gave up waiting")
	close(release)
	<-done
	require.Equal(t, 1, a.maxInflight, "two events of one key at the agent at once: %v", a.called())
}

// Bug 5 (fixed by 0804773: stale before any turn). A message let out of the parked table whose decision then fails
// (or dies with its process) is re-held for the sweep ("unparked again
// after 10ms"). An event at or below the key's version that arrives
// meanwhile parks behind its turn instead of being stale, and from then
// on every sweep lets nothing out; when the latecomer's hold times out,
// the key is blocked for a gap that does not exist ("waiting before
// version 2"). Here the message was let out by ReleaseKey (its decision
// fails once, attempt 1 of 3), the latecomer is v2, which the release
// recorded as a gap.
func TestRapidFoundLatecomerStallsAnUnparkedMessage(t *testing.T) {
	b := setup(t)
	a := newAgent()
	clock := newFoundClock()
	b.cfg.Now, b.cfg.Decide = clock.Now, a.decide
	b.cfg.HoldTimeout, b.cfg.Retry.MaxAttempts = time.Minute, 3
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"v1:applied"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 1)))
	require.Equal(t, []string{"v3:held"}, outcomes(mustDeliver(t, c, keyed("v3", "opp", 3), 1)))
	clock.Advance(2 * time.Minute)
	_, err := c.Sweep(ctx) // the hold times out: the key is blocked for the gap
	require.NoError(t, err)
	a.mu.Lock()
	a.fail["v3"] = 1
	a.mu.Unlock()
	results, err := c.ReleaseKey(ctx, "opp", "alice", "v2 never existed")
	require.NoError(t, err)
	require.Equal(t, []string{"v3:retry"}, outcomes(results))
	t.Log("v2:", outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	sweepEvery(t, c, clock, 30*time.Second, 3)
	require.Equal(t, "applied", outcomeOf(t, b, "v3"), "v3 failed once and was re-held for the sweep")
	require.Equal(t, "stale", outcomeOf(t, b, "v2"), "the release recorded version 2 as a gap")
}

// Bug 5 again, the way TestRapidModel met it: the message was let out by
// a redrive's drain and its process died while deciding it; the
// latecomer is v1, older than the key's first version.
func TestRapidFoundLatecomerStallsARedrivenSuccessor(t *testing.T) {
	b := setup(t)
	a := newAgent()
	clock := newFoundClock()
	var refuse sync.Map
	refuse.Store("v2", true)
	b.cfg.Now, b.cfg.Decide = clock.Now, refusing(a, &refuse)
	var crash fault.Hook // set once the dead letter and the block are in place
	c := b.armedConsumer(t, func(p fault.Point) error { return crash.At(p) })
	ctx := context.Background()
	require.Equal(t, []string{"v2:dead_lettered"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	require.Equal(t, []string{"v3:blocked"}, outcomes(mustDeliver(t, c, keyed("v3", "opp", 3), 1)))
	refuse.Delete("v2")
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	claims := 0
	crash = func(p fault.Point) error {
		if p == fault.AfterDecisionClaim {
			if claims++; claims == 2 { // v2's claim, then v3's: the process dies deciding v3
				return fault.ErrCrash
			}
		}
		return nil
	}
	_, _ = c.Redrive(ctx, letters[0].Seq)
	next := b.consumer(t) // a new process
	results := mustDeliver(t, next, keyed("v1", "opp", 1), 1)
	t.Log("v1:", outcomes(results), results[0].Reason)
	sweepEvery(t, next, clock, time.Minute, 3)
	require.Equal(t, "applied", outcomeOf(t, b, "v3"), "v3 was re-held for the sweep to let out")
	require.Equal(t, "stale", outcomeOf(t, b, "v1"), "v1 is older than the key's version")
}

// Bug 6. With OnDeadLetter=release, a redrive of a dead letter
// holds no turn on its key while it is decided: a new event of the key
// passes the gate and reaches the agent while the redriven one is still
// there (two events of one key at the agent at once). The redriven
// identity's inbox row still says dead_lettered, so its turn row reads as
// one left by a settled identity. With OnDeadLetter=block the key is
// blocked and the new event parks, as it should.
func TestRapidFoundRedriveAfterReleaseHoldsNoTurn(t *testing.T) {
	b := setup(t)
	a := newAgent()
	var refuse sync.Map
	refuse.Store("e3", true)
	b.cfg.Decide, b.cfg.OnDeadLetter = refusing(a, &refuse), seqbox.DeadLetterRelease
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"e3:dead_lettered"}, outcomes(mustDeliver(t, c, unversioned("e3", "opp"), 1)))
	_, release, done := redriveHeldAtTheAgent(t, b, c, a, &refuse, "e3")
	e1 := make(chan []seqboxtype.Result, 1)
	go func() {
		results, _ := c.Deliver(ctx, unversioned("e1", "opp"), 1)
		e1 <- results
	}()
	var asked bool
	select {
	case <-a.started: // e1 reached the agent while e3 is there
		asked = true
	case <-e1:
	}
	close(release)
	<-done
	if asked {
		<-e1
	}
	require.Equal(t, 1, a.maxInflight, "two events of one key at the agent at once: %v", a.called())
}

// redriveHeldAtTheAgent stops refusing id, redrives its (only) dead letter
// in the background with the agent holding the call until release is
// closed, and returns once the redrive is at the agent; done closes when
// the redrive ends.
func redriveHeldAtTheAgent(t *testing.T, b *bundle, c *seqbox.Consumer, a *agent, refuse *sync.Map, id string) (seq int64, release, done chan struct{}) {
	t.Helper()
	refuse.Delete(id)
	release, done = make(chan struct{}), make(chan struct{})
	a.mu.Lock()
	a.block[id] = release
	a.mu.Unlock()
	letters, err := b.store.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	go func() {
		defer close(done)
		_, _ = c.Redrive(context.Background(), letters[0].Seq)
	}()
	require.Equal(t, id, <-a.started) // the redrive is at the agent
	return letters[0].Seq, release, done
}

// sweepEvery moves the clock on by every and sweeps, n times.
func sweepEvery(t *testing.T, c *seqbox.Consumer, clock *testclock.Clock, every time.Duration, n int) {
	t.Helper()
	for range n {
		clock.Advance(every)
		_, err := c.Sweep(context.Background())
		require.NoError(t, err)
	}
}

// parkedTurnHolder brings key opp to a turn holder that is itself parked:
// v1 fails once and expires past its deadline, v3, held behind it, is let
// out, its call fails, and it goes back to the parked table with the
// key's turn.
func parkedTurnHolder(t *testing.T) (*bundle, *agent, *testclock.Clock, *seqbox.Consumer) {
	t.Helper()
	b := setup(t)
	a := newAgent()
	a.fail["v1"], a.fail["v3"] = 1, 1
	clock := newFoundClock()
	b.cfg.Now, b.cfg.Decide, b.cfg.MaxAge, b.cfg.HoldTimeout = clock.Now, a.decide, time.Hour, time.Minute
	c := b.consumer(t)
	old := clock.Now().Add(-50 * time.Minute)
	require.Equal(t, []string{"v1:retry"}, outcomes(mustDeliver(t, c, timed("v1", 1, old, ""), 1)))
	require.Equal(t, []string{"v3:held"}, outcomes(mustDeliver(t, c, timed("v3", 3, clock.Now(), ""), 1)))
	clock.Advance(20 * time.Minute) // v1 is past its deadline; v3 is let out, and its call fails
	require.Equal(t, []string{"v1:expired", "v3:retry"}, outcomes(mustDeliver(t, c, timed("v1", 1, old, ""), 2)))
	return b, a, clock, c
}

// Found by the state-machine test once it drew a business deadline and
// delivered copies directly (seed 5319360192409456554). A message that
// holds its key's turn went back to the parked table (it was let out, and
// its call failed transiently) behind a lower version that arrived after
// it took the turn. The parked line is in version order, so the sweep
// waited for the lower version, which waited for the turn: the key never
// moved again. The turn's holder now goes first.
func TestRapidFoundParkedTurnHolderBehindALowerVersionGoesFirst(t *testing.T) {
	_, a, clock, c := parkedTurnHolder(t)
	require.Equal(t, []string{"v2:held"}, outcomes(mustDeliver(t, c, timed("v2", 2, clock.Now(), ""), 1)))
	clock.Advance(2 * time.Minute) // past v3's backoff and v2's hold
	results, err := c.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"v3:applied", "v2:stale"}, outcomes(results))
	require.Equal(t, []string{"v1", "v3", "v3"}, a.called())
}

// A turn holder that is itself parked (let out, its call failed, back in
// the parked table with its turn) and that an operator releases is
// skipped for good: its parked copy goes with its turn, and it never
// reaches the agent again. Before, the release recorded it dead-lettered
// and skipped, then let its own parked copy out with the key's others:
// it was asked again and applied, under a dead letter that said skipped
// (helper-36's mutation sweep, m11).
func TestAReleasedTurnHolderThatIsParkedIsSkippedForGood(t *testing.T) {
	b, a, clock, c := parkedTurnHolder(t)
	ctx := context.Background()

	results, err := c.ReleaseKey(ctx, "opp", "alice", "v3 is obsolete")
	require.NoError(t, err)
	require.Empty(t, outcomes(results), "nothing else was parked behind it")
	seen, err := b.store.Executor().InboxSeen(ctx, store.MessageRef{Consumer: b.cfg.Name, Source: "crm", ID: "v3"})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLettered, seen.Outcome)
	parked, err := b.store.Executor().ParkedOfIdentity(ctx, store.MessageRef{Consumer: b.cfg.Name, Source: "crm", ID: "v3"})
	require.NoError(t, err)
	require.Empty(t, parked, "its parked copy went with its turn")

	clock.Advance(2 * time.Minute) // past v3's backoff
	results, err = c.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, outcomes(results))
	require.Equal(t, []string{"v1", "v3"}, a.called(), "the skipped v3 is not asked again")
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name, All: true,
		Of: &store.Identity{Source: "crm", ID: "v3"}})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, seqboxtype.DeadLetterSkipped, letters[0].State)
	require.Contains(t, string(letters[0].Envelope), `"id":"v3"`, "its envelope had reached the store: the dead letter keeps it")
}
