package seqbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ledgerAgent is a Decide that makes its call through the effects ledger,
// as the gateway's dispatch does: failing permanently for the ids in
// refuse (once each), answering with an uncertain error for those in
// reset, and holding the call of those in block until the test closes
// their channel (started says which call went out).
type ledgerAgent struct {
	l       *effects.Ledger
	mu      sync.Mutex
	refuse  map[string]int
	reset   map[string]bool
	block   map[string]chan struct{}
	started chan string
	calls   []string
}

func newLedgerAgent(t *testing.T, b *bundle) *ledgerAgent {
	l, err := effects.New(b.store, effects.Config{Timeout: time.Hour})
	require.NoError(t, err)
	return &ledgerAgent{l: l, refuse: map[string]int{}, reset: map[string]bool{}, block: map[string]chan struct{}{}, started: make(chan string, 16)}
}

func (a *ledgerAgent) decide(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
	a.mu.Lock()
	refuse := a.refuse[ev.ID] > 0
	if refuse {
		a.refuse[ev.ID]--
	}
	reset, block := a.reset[ev.ID], a.block[ev.ID]
	a.mu.Unlock()
	if refuse {
		return nil, seqbox.Permanent(errors.New("400 from the agent"))
	}
	ref, err := a.l.Do(ctx, "agent", func(ctx context.Context, key string) (string, error) {
		a.mu.Lock()
		a.calls = append(a.calls, ev.ID)
		a.mu.Unlock()
		a.started <- ev.ID
		if block != nil {
			<-block
		}
		if reset {
			return "", errors.New("connection reset by peer")
		}
		return "done-" + ev.ID, nil
	})
	return []byte(ref), err
}

func (a *ledgerAgent) called() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// elsewhere is a second consumer of the same name on b's store whose
// clock is an hour ahead: to it, every claim of the first looks dead, as
// a process frozen mid-call (SIGSTOP, a long pause) looks to the others.
func elsewhere(t *testing.T, b *bundle) *seqbox.Consumer {
	cfg := b.cfg
	cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	return c
}

// redriveInFlight dead-letters v1 of key opp (its first call refused),
// blocks v2 behind it, and redrives v1 in the background with its call
// held open at the agent: the state both operator tests start from. It
// returns the dead letter's seq, and the redrive's results once the test
// closes a.block["v1"].
func redriveInFlight(t *testing.T) (*bundle, *ledgerAgent, int64, chan []seqboxtype.Result) {
	b := setup(t)
	a := newLedgerAgent(t, b)
	a.refuse["v1"] = 1
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"v1:dead_lettered"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 1)))
	require.Equal(t, []string{"v2:blocked"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	a.block["v1"] = make(chan struct{})
	redriven := make(chan []seqboxtype.Result, 1)
	go func() {
		res, err := c.Redrive(ctx, letters[0].Seq)
		if err != nil {
			t.Errorf("redrive: %v", err)
		}
		redriven <- res
	}()
	require.Equal(t, "v1", <-a.started)
	return b, a, letters[0].Seq, redriven
}

// Found by an attacker with two gateways (helper-29): a redrive's call was
// in flight in a process that froze, its claim ran out, and dlq skip
// through the other process let the key's next event reach the agent
// while the first one's call was still open; the first then took effect,
// recorded skipped. A skip now waits for the dead letter's open call.
func TestSkipRefusesADeadLetterWhoseCallIsOpen(t *testing.T) {
	b, a, seq, redriven := redriveInFlight(t)
	ctx := context.Background()
	other := elsewhere(t, b)
	_, err := other.Skip(ctx, seq, "ops", "v1 is not needed")
	require.ErrorIs(t, err, seqbox.ErrCallOpen, "the skip let v2 go while v1's call was open")
	require.Equal(t, []string{"v1"}, a.called(), "v2 did not reach the agent")

	close(a.block["v1"])
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-redriven))
	require.Equal(t, []string{"v1", "v2"}, a.called())
}

// Found by the same attacker: a keyed turn holder whose call was uncertain
// (its caller died mid-call, the broker dropped its message) was ended by
// keys release, and another event of its business key then reached the
// agent. A release now waits for the call to be resolved; resolved as
// applied, the ended message keeps its business key, so the other event
// is not sent (the effect it asks for took place).
func TestReleaseRefusesATurnWhoseCallIsUncertain(t *testing.T) {
	b := setup(t)
	a := newLedgerAgent(t, b)
	a.reset["x"] = true
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"x:retry"}, outcomes(mustDeliver(t, c, withBusinessKey("x", "k1", "refund:7"), 1)))
	calls, err := a.l.List(ctx, effects.Filter{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, effects.Uncertain, calls[0].State)

	// keys show names the turn holder and the way out, though nothing is
	// parked behind it (before, the key read "ok" and the CLI refused to
	// release a key "not blocked").
	d, err := ops.Reporter{Op: b.store.Executor(), Consumer: b.cfg.Name}.Key(ctx, "k1")
	require.NoError(t, err)
	require.NotNil(t, d.Turn)
	require.Equal(t, "x", d.Turn.ID)
	require.Contains(t, d.Action, "seqbox keys release k1 --by WHO --reason WHY")
	// keys list --all too (it read "ok" with no reason and no way out).
	all, err := ops.Reporter{Op: b.store.Executor(), Consumer: b.cfg.Name}.Keys(ctx, true)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.NotNil(t, all[0].Turn, "keys list --all: %+v", all[0])
	require.Equal(t, "x", all[0].Turn.ID)
	require.Equal(t, d.Reason, all[0].Reason)
	require.Equal(t, d.Action, all[0].Action)

	other := elsewhere(t, b)
	_, err = other.ReleaseKey(ctx, "k1", "ops", "x was dropped by the broker")
	require.ErrorIs(t, err, seqbox.ErrCallOpen, "released while x's call may have taken effect")
	require.Contains(t, err.Error(), calls[0].IdempotencyKey, "the refusal names the call to resolve")

	// The operator finds the effect at the agent and says so.
	require.NoError(t, a.l.Resolve(ctx, calls[0].IdempotencyKey, effects.Succeeded, "task-9", "ops", "found in the CRM"))
	_, err = other.ReleaseKey(ctx, "k1", "ops", "x was dropped by the broker")
	require.NoError(t, err)

	results := mustDeliver(t, c, withBusinessKey("y", "k2", "refund:7"), 1)
	require.Len(t, results, 1)
	require.NotEqual(t, seqboxtype.Applied, results[0].Outcome, "y asked for the effect x's call made: %s", results[0].Reason)
	require.Equal(t, []string{"x"}, a.called(), "y did not reach the agent")

	// Found by a second attacker run (helper-30): retention purged x's
	// inbox row, the evidence that refund:7 took effect under it, and a
	// redrive of y then reached the agent. Such a row stays while the
	// ledger keeps x's call.
	later := b.cfg
	later.Now = func() time.Time { return time.Now().Add(90 * 24 * time.Hour) }
	purger, err := seqbox.NewConsumer(later)
	require.NoError(t, err)
	_, err = purger.Purge(ctx, 0)
	require.NoError(t, err)
	results = mustDeliver(t, c, withBusinessKey("y2", "k3", "refund:7"), 1)
	require.Len(t, results, 1)
	require.NotEqual(t, seqboxtype.Applied, results[0].Outcome, "after the purge, y2 asked again for x's effect: %s", results[0].Reason)
	require.Equal(t, []string{"x"}, a.called(), "y2 did not reach the agent after the purge")
}

// MaxBlock does not release a key whose blocker's call is open (the same
// rule as a skip's), and says so once a minute, not at every sweep (an
// attacker's run logged it twenty times in twenty seconds).
func TestMaxBlockWaitsForAnOpenCallAndSaysSoOnce(t *testing.T) {
	b, a, _, redriven := redriveInFlight(t)
	ctx := context.Background()
	var logs strings.Builder
	cfg := b.cfg
	cfg.MaxBlock = time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Hour).UnixNano())
	cfg.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	sweeper, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	for range 3 {
		results, err := sweeper.Sweep(ctx)
		require.NoError(t, err)
		require.Empty(t, results, "the key stays blocked while v1's call is open")
		clock.Add(int64(10 * time.Second))
	}
	require.Equal(t, 1, strings.Count(logs.String(), "not released: its blocker's call is open"), logs.String())
	require.Equal(t, []string{"v1"}, a.called())

	close(a.block["v1"])
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(<-redriven))
}

// A turn holder whose call took effect and whose decision is recorded,
// its apply not committed yet (its handler failed once; on a gateway, an
// apply waiting on a lock a frozen peer held): keys release ended its
// turn, and the event the agent applied ended dead-lettered while its
// successor went on (an attacker's two gateways on PostgreSQL). It
// applies when it comes back; the release is refused.
func TestReleaseRefusesATurnWhoseDecisionIsRecorded(t *testing.T) {
	b := setup(t)
	a := newLedgerAgent(t, b)
	b.cfg.Decide = a.decide
	var fail atomic.Bool
	fail.Store(true)
	record := b.cfg.Handler
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if fail.Load() {
			return errors.New("the database said: try again")
		}
		return record(ctx, tx, ev)
	}
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"x:retry"}, outcomes(mustDeliver(t, c, keyed("x", "k1", 1), 1)))
	require.Equal(t, []string{"x"}, a.called())
	calls, err := a.l.List(ctx, effects.Filter{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, effects.Succeeded, calls[0].State)

	_, err = elsewhere(t, b).ReleaseKey(ctx, "k1", "ops", "x looks stuck")
	require.ErrorIs(t, err, seqbox.ErrDecided, "released a turn whose call took effect")

	// It applies when it comes back, without asking again.
	fail.Store(false)
	require.Equal(t, []string{"x:applied"}, outcomes(mustDeliver(t, c, keyed("x", "k1", 1), 2)))
	require.Equal(t, []string{"x"}, a.called())
}
