package seqbox_test

// Claims follow liveness (docs/design.md §10.2): a
// decision claim is renewed every ClaimHeartbeat while its Decide runs, so
// a slow but live Decide keeps it for as long as it takes, and only a
// claim whose heartbeat stopped is taken over. These tests run a Decide
// that outlives many heartbeats inside a testing/synctest bubble (fake
// clock, no sleeping on real time): a claim that stops renewing lets a
// second process ask the model again, or lets an operator end the turn of
// a message being decided. Planted-bug table: docs/mutation.md.

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// slowModel is a Decide that blocks until released (or its context ends)
// and counts the times it was asked.
type slowModel struct {
	asked   atomic.Int32
	release chan struct{}
}

// answer lets every Decide in flight return (once; deferred, so that a
// failing test does not leave the bubble's goroutines blocked).
func (m *slowModel) answer() {
	select {
	case <-m.release:
	default:
		close(m.release)
	}
}

func (m *slowModel) decide(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
	m.asked.Add(1)
	select {
	case <-m.release:
		return []byte("plan for " + ev.ID), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slowDecideConfig opens a SQLite store inside the bubble and returns a
// config with a slow model and a 1 s claim heartbeat; close ends it.
func slowDecideConfig(t *testing.T, m *slowModel) (cfg seqbox.Config, close func()) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	return seqbox.Config{
		Name: "test", Store: st, Handler: replay.RecordHandler("test"), Decide: m.decide,
		ClaimHeartbeat: time.Second, DecideTimeout: 10 * time.Minute,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}},
	}, func() { _ = st.Close() }
}

// A Decide that runs for 20 heartbeats keeps its claim: a copy delivered
// to a second process meanwhile waits for it (retry, no attempt spent)
// instead of asking the model again. A claim whose heartbeat never renews
// runs out after three heartbeats and the second process asks the model
// a second time.
func TestSlowLiveDecideIsAskedOnceAcrossProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &slowModel{release: make(chan struct{})}
		cfg, closeStore := slowDecideConfig(t, m)
		defer closeStore()
		defer m.answer()
		first, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		second, err := seqbox.NewConsumer(cfg) // another process: its own decider and claimant
		require.NoError(t, err)
		ctx := context.Background()
		msg := unversioned("m", "opp")

		done := make(chan []seqboxtype.Result, 1)
		go func() {
			results, err := first.Deliver(ctx, msg, 1)
			require.NoError(t, err)
			done <- results
		}()
		synctest.Wait()
		require.Equal(t, int32(1), m.asked.Load(), "the first process asks the model")

		// Several copies at the second process while the first Decide is
		// still running, 20 heartbeats in all.
		for i := range 4 {
			time.Sleep(5*time.Second + 500*time.Millisecond)
			res := make(chan []seqboxtype.Result, 1)
			go func() {
				results, err := second.Deliver(ctx, msg, 2+i)
				require.NoError(t, err)
				res <- results
			}()
			synctest.Wait()
			require.Equal(t, int32(1), m.asked.Load(),
				"a copy at another process asked the model again while the first Decide was alive (%s in): its claim was not renewed",
				time.Duration(i+1)*5500*time.Millisecond)
			results := <-res
			require.Equal(t, seqboxtype.Retry, results[0].Outcome, results[0].Reason)
			require.Contains(t, results[0].Reason, "in flight elsewhere")
		}
		m.answer()
		results := <-done
		require.Equal(t, []string{"m:applied"}, outcomes(results))
		results, err = second.Deliver(ctx, msg, 6)
		require.NoError(t, err)
		require.Equal(t, []string{"m:duplicate"}, outcomes(results))
		require.Equal(t, int32(1), m.asked.Load())
	})
}

// The turn of a message whose slow Decide is alive cannot be ended by an
// operator (ReleaseKey) or taken as dead by the sweep, however long the
// Decide runs: its claim is live. A claim that stopped renewing looks
// dead after three heartbeats, and the release ends a turn whose message
// is reaching the agent.
func TestSlowLiveDecideKeepsItsTurnAgainstRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &slowModel{release: make(chan struct{})}
		cfg, closeStore := slowDecideConfig(t, m)
		defer closeStore()
		defer m.answer()
		c, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		ctx := context.Background()
		done := make(chan []seqboxtype.Result, 1)
		go func() {
			results, err := c.Deliver(ctx, unversioned("v1", "opp"), 1)
			require.NoError(t, err)
			done <- results
		}()
		synctest.Wait()
		results, err := c.Deliver(ctx, unversioned("v2", "opp"), 1)
		require.NoError(t, err)
		require.Equal(t, []string{"v2:held"}, outcomes(results))
		for range 3 {
			time.Sleep(4*time.Second + 250*time.Millisecond)
			_, err := c.ReleaseKey(ctx, "opp", "ops", "impatient")
			require.ErrorIs(t, err, seqbox.ErrBeingDecided, "a live, slow Decide's claim must stay live")
		}
		m.answer()
		require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-done))
		require.Equal(t, int32(2), m.asked.Load())
	})
}

// The sweep ends the turn of a message that never came back (docs/design.md
// §10.1, turn_end.go) only when no decision claim of it is alive: a slow
// Decide that outlives the broker's redelivery window keeps its turn, its
// key's successor stays held behind it, and both apply in order once it
// answers.
func TestSweepLeavesTheTurnOfASlowLiveDecide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &slowModel{release: make(chan struct{})}
		cfg, closeStore := slowDecideConfig(t, m)
		defer closeStore()
		defer m.answer()
		cfg.RedeliveryWindow, cfg.DLQRetention, cfg.RedriveWindow, cfg.Retention = time.Minute, time.Hour, time.Hour, 3*time.Hour
		cfg.HoldTimeout = 30 * time.Second // v2's hold expires: the sweep looks at the turn it waits behind
		c, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		ctx := context.Background()
		done := make(chan []seqboxtype.Result, 1)
		go func() {
			results, err := c.Deliver(ctx, unversioned("v1", "opp"), 1)
			require.NoError(t, err)
			done <- results
		}()
		synctest.Wait()
		results, err := c.Deliver(ctx, unversioned("v2", "opp"), 1)
		require.NoError(t, err)
		require.Equal(t, []string{"v2:held"}, outcomes(results))
		time.Sleep(2*time.Minute + 500*time.Millisecond) // past the redelivery window, v1's Decide still running
		swept, err := c.Sweep(ctx)
		require.NoError(t, err)
		require.NotContains(t, outcomes(swept), "v1:dead_lettered", "the sweep ended the turn of a message being decided")
		require.NotContains(t, outcomes(swept), "v2:applied", "the sweep let v2 overtake v1, which is being decided")
		require.Equal(t, int32(1), m.asked.Load())
		m.answer()
		require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-done), "v1's turn was ended while it was being decided")
	})
}

// A slow Decide that fails spends its message's attempts: its claim's
// heartbeat renewed the claim all along, so the failure is the message's,
// not a takeover's (which would send it back without counting, to wait
// for the new owner). A heartbeat that took a renewal for a loss made
// every slow failure free: the message retried for good and never reached
// the DLQ (found by mutation testing, docs/mutation.md).
func TestSlowFailingDecideSpendsItsAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &slowModel{release: make(chan struct{})}
		cfg, closeStore := slowDecideConfig(t, m)
		defer closeStore()
		cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			m.asked.Add(1)
			time.Sleep(5 * time.Second) // five heartbeats, each renewing the claim
			return nil, errors.New("the model timed out")
		}
		c, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		ctx := context.Background()
		msg := unversioned("m", "opp")
		var got []string
		for attempt := 1; attempt <= 3; attempt++ {
			results, err := c.Deliver(ctx, msg, attempt)
			require.NoError(t, err)
			require.Len(t, results, 1)
			require.NotContains(t, results[0].Reason, "in flight elsewhere", "attempt %d: a live claim's failure was taken for a takeover", attempt)
			got = append(got, string(results[0].Outcome))
		}
		require.Equal(t, []string{"retry", "retry", "dead_lettered"}, got)
		require.Equal(t, int32(3), m.asked.Load())
	})
}

// lateBeats is the store with a decider whose claim renewals are late
// while late is set: each one fails before it reaches the database (a
// stalled disk, a long pause), as a heartbeat that missed its slot would.
// Everything else, and every renewal once late is cleared, runs on the
// real store.
type lateBeats struct {
	wrapped
	late atomic.Bool
}

func (s *lateBeats) Executor() store.Executor {
	return &lateBeatsExecutor{Executor: s.Store.Executor(), s: s}
}

type lateBeatsExecutor struct {
	store.Executor
	s *lateBeats
}

func (e *lateBeatsExecutor) DecisionClaimExtend(ctx context.Context, p store.DecisionClaimParams) (bool, error) {
	if e.s.late.Load() {
		return false, errors.New("the renewal was late: it never reached the database")
	}
	return e.Executor.DecisionClaimExtend(ctx, p)
}

// deliverAt delivers raw through c as its attempt-th delivery in a
// goroutine that wg counts; its results, or its error as one result, come
// on the channel. A test waits for wg before it closes the store, so that
// no delivery outlives it, failing or not.
func deliverAt(wg *sync.WaitGroup, c *seqbox.Consumer, raw []byte, attempt int) chan []seqboxtype.Result {
	done := make(chan []seqboxtype.Result, 1)
	wg.Go(func() {
		results, err := c.Deliver(context.Background(), raw, attempt)
		if err != nil {
			results = []seqboxtype.Result{{Outcome: "error", Reason: err.Error()}}
		}
		done <- results
	})
	return done
}

// A Decide whose claim was taken over while it ran (its heartbeat was
// late for three beats, and another process's copy took the claim and is
// asking now) and that then fails spends no attempt of its message: the
// failure is the lost claim's, and the new owner decides. On the
// message's last attempt, the copy goes back to wait for the new owner
// instead of being dead-lettered while that owner is still deciding it;
// the new owner's decision applies it. Covers decideOnce's failure after
// losing the claim (lost, set by the heartbeat) being charged as the
// message's own.
//
// Three ways: the heartbeat has seen the loss (a renewal reached the
// database and found the claim another's); its renewals failed until the
// failure, whose own look finds the claim another's; its renewals still
// fail (a stalled disk), so nobody can tell. Before, the last two
// dead-lettered the message on its last attempt while the new owner was
// asking, whose decision was then recorded and never applied.
func TestAFailureAfterTheClaimWasTakenOverSpendsNoAttempt(t *testing.T) {
	for _, c := range []takeover{
		{name: "the heartbeat saw the loss", beat: true, looked: true, reason: "in flight elsewhere"},
		{name: "the failure's look finds it another's", looked: true, reason: "in flight elsewhere"},
		// It waits out the claim's life (three heartbeats), not the
		// shortest wait: by then the claim is the new owner's, renewed,
		// or free.
		{name: "its renewals still fail", reason: "whether its claim is still its own could not be read", wait: 3 * time.Second},
		// The new owner's clock runs 1.5 heartbeats ahead: it takes the
		// claim over 1.5 s after it was taken, and the failure comes 2 s
		// after, older than a heartbeat on the first process's clock but
		// younger than three (a check against the claim's whole life
		// would not look).
		{name: "a skewed clock took it over early", looked: true, skew: 1500 * time.Millisecond, reason: "in flight elsewhere"},
	} {
		t.Run(c.name, func(t *testing.T) { failAfterTakeover(t, c) })
	}
}

// takeover is a case of TestAFailureAfterTheClaimWasTakenOverSpendsNoAttempt.
type takeover struct {
	name   string
	beat   bool          // the renewals reach the database a beat before the failure
	looked bool          // they reach it just before the failure (no beat between)
	skew   time.Duration // how far ahead the new owner's clock runs (0: the claim runs out unrenewed first)
	reason string        // the first process's retry says
	wait   time.Duration // the retry's wait, when the case names one
}

func failAfterTakeover(t *testing.T, c takeover) {
	synctest.Test(t, func(t *testing.T) {
		asked := make(chan string, 8)
		fail, answer := make(chan struct{}), make(chan struct{})
		var calls atomic.Int32
		cfg, closeStore := slowDecideConfig(t, &slowModel{release: make(chan struct{})})
		defer closeStore()
		var wg sync.WaitGroup
		defer wg.Wait()
		defer closeOpen(fail, answer)
		cfg.Retry.MaxBackoff = time.Minute // a wait is capped by it: above the claim's life
		last := int32(cfg.Retry.MaxAttempts)
		cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			n := calls.Add(1)
			asked <- ev.ID
			switch {
			case n < last: // the attempts before the last fail at once
				return nil, errors.New("503 from the model")
			case n == last: // the last attempt's ask: it fails once its claim is lost
				select {
				case <-fail:
					return nil, errors.New("503 from the model")
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			select { // the new owner's ask
			case <-answer:
				return []byte("plan for " + ev.ID), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		slow := &lateBeats{wrapped: wrapped{cfg.Store}}
		firstCfg := cfg
		firstCfg.Store = slow
		first, err := seqbox.NewConsumer(firstCfg)
		require.NoError(t, err)
		secondCfg := cfg // another process, renewing on time
		if c.skew > 0 {
			secondCfg.Now = func() time.Time { return time.Now().Add(c.skew) }
		}
		second, err := seqbox.NewConsumer(secondCfg)
		require.NoError(t, err)
		ctx := context.Background()
		msg := unversioned("m", "opp")
		for attempt := 1; attempt < int(last); attempt++ {
			results, err := first.Deliver(ctx, msg, attempt)
			require.NoError(t, err)
			require.Equal(t, []string{"m:retry"}, outcomes(results), results[0].Reason)
			<-asked
		}

		slow.late.Store(true)
		firstDone := deliverAt(&wg, first, msg, int(last)) // its last attempt
		require.Equal(t, "m", <-asked)
		if c.skew > 0 {
			time.Sleep(3*time.Second + 100*time.Millisecond - c.skew) // the claim ran out on the new owner's clock
		} else {
			time.Sleep(3*time.Second + 500*time.Millisecond) // three late beats: the claim ran out
		}
		secondDone := deliverAt(&wg, second, msg, int(last)+1)
		require.Equal(t, "m", <-asked, "the second process takes the claim over and asks")
		if c.skew > 0 {
			time.Sleep(400 * time.Millisecond) // the failure comes 2 s after the claim, on the first process's clock
		}
		if c.beat {
			slow.late.Store(false)
			time.Sleep(time.Second) // the first process's next beat reaches the database: its claim is another's
		}
		synctest.Wait()
		slow.late.Store(!c.looked)

		close(fail)
		results := <-firstDone
		require.Len(t, results, 1)
		require.Equal(t, seqboxtype.Retry, results[0].Outcome,
			"a failure after the claim was taken over spent the message's last attempt (%s) while the new owner decides it: %s",
			results[0].Outcome, results[0].Reason)
		require.Contains(t, results[0].Reason, c.reason)
		if c.wait > 0 {
			require.Equal(t, c.wait, results[0].RetryAfter)
		}

		close(answer)
		require.Equal(t, []string{"m:applied"}, outcomes(<-secondDone))
		require.Equal(t, last+1, calls.Load())
	})
}

// A decider frozen right after its claim (a stopped process, a long
// pause: here at the after_decision_claim fault point, before its
// heartbeat starts) for longer than the claim lives has been taken over
// by the time it thaws: another process's copy took the claim and is
// asking the agent. The thawed decider looks at its claim again before it
// asks, finds it another's, and waits for the new owner; the agent is
// asked once, by the new owner. Covers decideOnce's re-check of the claim
// right before the ask, for a claim older than a heartbeat whose loss its
// heartbeat has not seen yet.
func TestADeciderFrozenPastItsClaimDoesNotAsk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent()
		frozen, thaw, answer := make(chan struct{}), make(chan struct{}), make(chan struct{})
		a.block["m"] = answer
		cfg, closeStore := slowDecideConfig(t, &slowModel{release: make(chan struct{})})
		defer closeStore()
		var wg sync.WaitGroup
		defer wg.Wait()
		defer closeOpen(thaw, answer)
		cfg.Decide = a.decide
		var froze atomic.Bool
		first, err := seqbox.NewConsumer(armed(cfg, func(p fault.Point) error {
			if p == fault.AfterDecisionClaim && froze.CompareAndSwap(false, true) {
				close(frozen)
				<-thaw
			}
			return nil
		}))
		require.NoError(t, err)
		second, err := seqbox.NewConsumer(cfg) // another process
		require.NoError(t, err)
		msg := unversioned("m", "opp")

		firstDone := deliverAt(&wg, first, msg, 1)
		<-frozen // claimed, not asked yet
		// Frozen past its claim's three heartbeats.
		time.Sleep(3*time.Second + 500*time.Millisecond)
		secondDone := deliverAt(&wg, second, msg, 2)
		require.Equal(t, "m", <-a.started, "the second process takes the claim over and asks")

		close(thaw)
		synctest.Wait() // the thawed decider has asked, or gone back to wait
		require.Equal(t, []string{"m"}, a.called(), "a decider whose claim was taken over while it was frozen asked the agent too")
		results := <-firstDone
		require.Len(t, results, 1)
		require.Equal(t, seqboxtype.Retry, results[0].Outcome, results[0].Reason)
		require.Contains(t, results[0].Reason, "in flight elsewhere")

		close(answer)
		require.Equal(t, []string{"m:applied"}, outcomes(<-secondDone))
		require.Equal(t, []string{"m"}, a.called())
	})
}

// closeOpen closes each channel not closed yet: a test's deferred release
// of what it may have left blocked.
func closeOpen(chans ...chan struct{}) {
	for _, c := range chans {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

// A message let out of the parked table and stopped to be decided goes
// back as held for ten heartbeats (decidingHold); a Decide slower than
// that is let out again by the sweep, which stops it again and waits for
// the call in flight. Both runs again then go through the key's
// unparking, which takes the message only if it is still parked: the one
// that comes second finds it applied and does nothing. Run again as the
// parked row it once was, it applied a second time.
func TestSlowDecisionOfAnUnparkedMessageLetOutAgainAppliesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := unparkedAndDeciding(t)
		defer u.closeStore()
		defer func() {
			select {
			case <-u.release:
			default:
				close(u.release)
			}
		}()
		cfg, c, a, release, done, ctx := u.cfg, u.c, u.a, u.release, u.done, context.Background()
		time.Sleep(11 * cfg.ClaimHeartbeat)
		swept := make(chan []seqboxtype.Result, 1)
		go func() {
			results, err := c.Sweep(ctx)
			require.NoError(t, err)
			swept <- results
		}()
		synctest.Wait() // the sweep let v1 out again and waits for its call

		close(release)
		// The Deliver that let v1 out and the sweep both wait on its one
		// call: whichever runs first when it answers applies v1, and the
		// other finds it applied.
		delivered, sweptOut := outcomes(<-done), outcomes(<-swept)
		require.Equal(t, "v0:applied", delivered[0])
		require.Equal(t, []string{"v1:applied"}, append(delivered[1:], sweptOut...), "v1 applied once, by one of them")
		var effects int
		require.NoError(t, cfg.Store.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND id = 'v1'`,
			cfg.Name).Scan(&effects))
		require.Equal(t, 1, effects, "v1 applied twice")
		require.Equal(t, []string{"v0", "v0", "v1"}, a.called())
	})
}

// A message let out of the parked table and stopped to be decided goes
// back to the parked table held until its decision's hold ends (ten
// heartbeats), with why: the sweep lets it out again only then. Kept
// with the hold it had (run out, or none), the next sweep let it out
// again at once while it was being decided; only the randomized
// state-machine test caught that (helper-36's mutant m23, keepTurn
// without its rehold).
func TestAMessageLetOutToBeDecidedIsHeldUntilItsDecisionsHoldEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := unparkedAndDeciding(t)
		defer u.closeStore()
		cfg, release, done, ctx := u.cfg, u.release, u.done, context.Background()
		parked, err := cfg.Store.Executor().ParkedOfIdentity(ctx, store.MessageRef{Consumer: cfg.Name, Source: "crm", ID: "v1"})
		require.NoError(t, err)
		require.Len(t, parked, 1)
		require.Equal(t, time.Now().Add(10*cfg.ClaimHeartbeat).UnixMicro(), parked[0].HoldUntil.UnixMicro(),
			"held until its decision's hold ends")
		require.NotEmpty(t, parked[0].Detail)

		close(release)
		require.Equal(t, []string{"v0:applied", "v1:applied"}, outcomes(<-done))
	})
}

// unparked is a key (opp) whose v1 was let out of the parked table and is
// being decided: v0 failed once, v1 was held behind it, and v0's
// redelivery (its results come on done) applied it and let v1 out, whose
// Decide waits for release.
type unparked struct {
	cfg        seqbox.Config
	c          *seqbox.Consumer
	a          *agent
	release    chan struct{}
	done       chan []seqboxtype.Result
	closeStore func()
}

// unparkedAndDeciding sets up unparked; call it in a synctest bubble.
func unparkedAndDeciding(t *testing.T) *unparked {
	t.Helper()
	cfg, closeStore := slowDecideConfig(t, &slowModel{})
	u := &unparked{cfg: cfg, a: newAgent(), release: make(chan struct{}), done: make(chan []seqboxtype.Result, 1), closeStore: closeStore}
	u.a.fail["v0"] = 1
	u.a.block["v1"] = u.release
	u.cfg.Decide = u.a.decide
	c, err := seqbox.NewConsumer(u.cfg)
	require.NoError(t, err)
	u.c = c
	require.Equal(t, []string{"v0:retry"}, outcomes(mustDeliver(t, c, unversioned("v0", "opp"), 1)))
	require.Equal(t, []string{"v1:held"}, outcomes(mustDeliver(t, c, unversioned("v1", "opp"), 1)))
	go func() {
		results, err := c.Deliver(context.Background(), unversioned("v0", "opp"), 2)
		require.NoError(t, err)
		u.done <- results
	}()
	synctest.Wait() // v0 applied and let v1 out; v1's Decide waits
	require.Equal(t, []string{"v0", "v0", "v1"}, u.a.called())
	return u
}
