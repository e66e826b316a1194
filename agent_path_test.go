package seqbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// agent is a scripted model: it records every call in order, fails the
// ids told to, blocks the ids told to until released, and counts the calls
// in flight.
type agent struct {
	mu          sync.Mutex
	calls       []string
	fail        map[string]int
	block       map[string]chan struct{}
	started     chan string
	inflight    int
	maxInflight int
	panicOn     string
}

func newAgent() *agent {
	return &agent{fail: map[string]int{}, block: map[string]chan struct{}{}, started: make(chan string, 1024)}
}

func (a *agent) decide(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
	a.mu.Lock()
	a.calls = append(a.calls, ev.ID)
	a.inflight++
	a.maxInflight = max(a.maxInflight, a.inflight)
	fail := a.fail[ev.ID] > 0
	if fail {
		a.fail[ev.ID]--
	}
	block := a.block[ev.ID]
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inflight--
		a.mu.Unlock()
	}()
	a.started <- ev.ID
	if ev.ID == a.panicOn {
		panic("the model client crashed")
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail {
		return nil, errors.New("503 from the model")
	}
	return []byte("plan for " + ev.ID), nil
}

func (a *agent) called() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func unversioned(id, key string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","partitionkey":%q}`, id, key)
}

func withBusinessKey(id, key, bk string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","partitionkey":%q,"businesskey":%q}`, id, key, bk)
}

func outcomes(results []seqboxtype.Result) []string {
	var out []string
	for _, res := range results {
		out = append(out, res.ID+":"+string(res.Outcome))
	}
	return out
}

// Class 1: while an earlier event of a key retries, the key's later
// events do not reach the agent, with versions (a new key's first ones)
// and without.
func TestAgentSeesAKeyInOrderAcrossRetries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v1, v2 []byte
	}{
		{"first versions of a new key", keyed("v1", "opp", 1), keyed("v2", "opp", 2)},
		{"no objectversion", unversioned("v1", "opp"), unversioned("v2", "opp")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			a := newAgent()
			a.fail["v1"] = 1
			b.cfg.Decide = a.decide
			c := b.consumer(t)
			ctx := context.Background()
			results, err := c.Deliver(ctx, tc.v1, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"v1:retry"}, outcomes(results), results[0].Reason)
			results, err = c.Deliver(ctx, tc.v2, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"v2:held"}, outcomes(results), "v2 waits behind v1, which holds its key's turn")
			require.Equal(t, []string{"v1"}, a.called(), "v2 must not reach the agent while v1 retries")
			results, err = c.Deliver(ctx, tc.v1, 2)
			require.NoError(t, err)
			require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(results))
			require.Equal(t, []string{"v1", "v1", "v2"}, a.called())
		})
	}
}

// Class 2: a consumer dies while the agent decides a new key's first
// event. Its successor arrives first at the next consumer: it waits behind
// the dead one's turn instead of becoming the key's baseline (which made
// v1 stale and lost it), and v1's redelivery is decided at once (its
// claim died with its decider's heartbeat).
func TestCrashMidDecisionKeepsTheKeysTurn(t *testing.T) {
	b := setup(t)
	b.cfg.ClaimHeartbeat = 20 * time.Millisecond
	a := newAgent()
	a.block["v1"] = make(chan struct{}) // never answers: the process dies first
	b.cfg.Decide = a.decide
	dying := b.consumer(t)
	ctx, crash := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := dying.Deliver(ctx, keyed("v1", "opp", 1), 1)
		errc <- err
	}()
	require.Equal(t, "v1", <-a.started)
	crash()
	require.Error(t, <-errc)

	delete(a.block, "v1")
	next := b.consumer(t)
	results, err := next.Deliver(context.Background(), keyed("v2", "opp", 2), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"v2:held"}, outcomes(results), "v2 waits for v1; it must not take the key's baseline")
	results, err = next.Deliver(context.Background(), keyed("v1", "opp", 1), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"v1:applied", "v2:applied"}, outcomes(results))
	require.Equal(t, []string{"v1", "v1", "v2"}, a.called())
	<-a.started
	<-a.started
}

// Class 3: two identities asking for one effect (businesskey) in one
// batch, or later, reach the agent once.
func TestBusinessKeyDuplicateNeverReachesTheAgent(t *testing.T) {
	b := setup(t)
	a := newAgent()
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	out, err := c.DeliverBatch(ctx, [][]byte{withBusinessKey("a", "k1", "followup:1"), withBusinessKey("b", "k2", "followup:1")})
	require.NoError(t, err)
	require.Equal(t, []string{"a:applied"}, outcomes(out[0]))
	require.Equal(t, []string{"b:retry"}, outcomes(out[1]), "b waits while a, which asks for its effect, is decided")
	results, err := c.Deliver(ctx, withBusinessKey("b", "k2", "followup:1"), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"b:semantic_duplicate"}, outcomes(results))
	results, err = c.Deliver(ctx, withBusinessKey("c", "k3", "followup:1"), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"c:semantic_duplicate"}, outcomes(results))
	require.Equal(t, []string{"a"}, a.called())
}

// Class 3, concurrent: the second identity arrives while the first is
// being decided; it waits (keeping its own key's turn) and ends a
// semantic duplicate, without reaching the agent.
func TestBusinessKeyInFlightWaits(t *testing.T) {
	b := setup(t)
	a := newAgent()
	release := make(chan struct{})
	a.block["a"] = release
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	first := make(chan []seqboxtype.Result, 1)
	go func() {
		results, err := c.Deliver(ctx, withBusinessKey("a", "k1", "followup:1"), 1)
		require.NoError(t, err)
		first <- results
	}()
	require.Equal(t, "a", <-a.started)
	results, err := c.Deliver(ctx, withBusinessKey("b", "k2", "followup:1"), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"b:retry"}, outcomes(results), "b waits for a's decision")
	require.Contains(t, results[0].Reason, "being decided")
	results, err = c.Deliver(ctx, unversioned("b2", "k2"), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"b2:held"}, outcomes(results), "b keeps its key's turn while it waits")
	close(release)
	require.Equal(t, []string{"a:applied"}, outcomes(<-first))
	results, err = c.Deliver(ctx, withBusinessKey("b", "k2", "followup:1"), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"b:semantic_duplicate", "b2:applied"}, outcomes(results))
	require.Equal(t, []string{"a", "b2"}, a.called())
}

// Class 5: copies of one message in a batch, or concurrent in one
// process, ask the model once.
func TestCopiesAskTheModelOnce(t *testing.T) {
	b := setup(t)
	a := newAgent()
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	m := keyed("m", "opp", 1)
	out, err := c.DeliverBatch(ctx, [][]byte{m, m})
	require.NoError(t, err)
	require.Equal(t, []string{"m:applied"}, outcomes(out[0]))
	require.Equal(t, []string{"m:duplicate"}, outcomes(out[1]))
	require.Equal(t, "m", <-a.started)

	release := make(chan struct{})
	a.block["n"] = release
	n := unversioned("n", "other")
	var wg sync.WaitGroup
	res := make([][]seqboxtype.Result, 2)
	for i := range res {
		wg.Go(func() {
			results, err := c.Deliver(ctx, n, 1)
			require.NoError(t, err)
			res[i] = results
		})
	}
	require.Equal(t, "n", <-a.started)
	close(release)
	wg.Wait()
	got := []string{string(res[0][0].Outcome), string(res[1][0].Outcome)}
	require.ElementsMatch(t, []string{"applied", "duplicate"}, got)
	require.Equal(t, []string{"m", "n"}, a.called())
}

// Class 6: concurrent copies of one identity with different payloads end
// applied and collision, deciding once and stalling nothing.
func TestConcurrentCopiesWithDifferentPayloads(t *testing.T) {
	b := setup(t)
	a := newAgent()
	release := make(chan struct{})
	a.block["m"] = release
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	res := make([][]seqboxtype.Result, 2)
	for i, raw := range [][]byte{keyed("m", "opp", 1), []byte(`{"id":"m","source":"crm","type":"t","partitionkey":"opp","objectversion":1,"data":{"other":true}}`)} {
		wg.Go(func() {
			results, err := c.Deliver(ctx, raw, 1)
			require.NoError(t, err)
			res[i] = results
		})
	}
	require.Equal(t, "m", <-a.started)
	close(release)
	wg.Wait()
	got := []string{string(res[0][0].Outcome), string(res[1][0].Outcome)}
	require.ElementsMatch(t, []string{"applied", "collision"}, got)
	require.Equal(t, []string{"m"}, a.called())
}

// Class 7: a message released from the parked table, or redriven, is
// decided outside any transaction: the decider can write to the database
// while it decides, which an open SQLite write transaction would forbid.
func TestUnparkedAndRedrivenAreDecidedOutsideTheTransaction(t *testing.T) {
	b := setup(t)
	a := newAgent()
	_, err := b.store.DB().Exec(`CREATE TABLE probe (id TEXT)`)
	require.NoError(t, err)
	broken := map[string]bool{}
	var mu sync.Mutex
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		// Nothing may hold the write lock while the agent is called.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := b.store.DB().ExecContext(wctx, `INSERT INTO probe (id) VALUES ($1)`, ev.ID); err != nil {
			return nil, seqbox.Permanent(fmt.Errorf("the database was locked during the decision: %w", err))
		}
		mu.Lock()
		fail := broken[ev.ID]
		mu.Unlock()
		if fail {
			return nil, seqbox.Permanent(errors.New("agent refused"))
		}
		return a.decide(ctx, ev)
	}
	c := b.consumer(t)
	ctx := context.Background()
	results, err := c.Deliver(ctx, keyed("v2", "opp", 2), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"v2:applied"}, outcomes(results[:1]))
	// A gap: v4 waits for v3; v3 releases it from the parked table.
	results, err = c.Deliver(ctx, keyed("v4", "opp", 4), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"v4:held"}, outcomes(results))
	results, err = c.Deliver(ctx, keyed("v3", "opp", 3), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"v3:applied", "v4:applied"}, outcomes(results))
	// A dead letter, redriven.
	results, err = c.Deliver(ctx, keyed("x1", "other", 1), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"x1:applied"}, outcomes(results))
	mu.Lock()
	broken["x2"] = true
	mu.Unlock()
	results, err = c.Deliver(ctx, keyed("x2", "other", 2), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLettered, results[0].Outcome)
	results, err = c.Deliver(ctx, keyed("x3", "other", 3), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"x3:blocked"}, outcomes(results))
	mu.Lock()
	broken["x2"] = false
	mu.Unlock()
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	results, err = c.Redrive(ctx, letters[0].Seq)
	require.NoError(t, err)
	require.Equal(t, []string{"x2:applied", "x3:applied"}, outcomes(results))
	require.Equal(t, []string{"v2", "v3", "v4", "x1", "x2", "x3"}, a.called())
}

// Class 12: a panic in Decide dead-letters its message; the process and
// the other messages carry on.
func TestPanicInDecideIsRecovered(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.panicOn = "boom"
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	out, err := c.DeliverBatch(context.Background(), [][]byte{keyed("boom", "k1", 1), keyed("fine", "k2", 1)})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLettered, out[0][0].Outcome)
	require.Contains(t, out[0][0].Reason, "decide panicked")
	require.Equal(t, []string{"fine:applied"}, outcomes(out[1]))
}

// Class 13: Decide runs with bounded concurrency.
func TestDecideConcurrencyIsBounded(t *testing.T) {
	b := setup(t)
	a := newAgent()
	b.cfg.Decide = a.decide
	b.cfg.DecideConcurrency = 3
	c := b.consumer(t)
	var raws [][]byte
	for i := range 40 {
		raws = append(raws, keyed(fmt.Sprintf("m%d", i), fmt.Sprintf("k%d", i), 1))
	}
	out, err := c.DeliverBatch(context.Background(), raws)
	require.NoError(t, err)
	for _, results := range out {
		require.Equal(t, seqboxtype.Applied, results[0].Outcome)
	}
	require.Len(t, a.called(), 40)
	require.LessOrEqual(t, a.maxInflight, 3)
	require.Equal(t, 64, seqbox.DefaultDecideConcurrency)
}

// Class 8: an empty message (a Kafka tombstone) is rejected, not retried
// forever on a NOT NULL constraint.
func TestEmptyMessageIsRejected(t *testing.T) {
	b := setup(t)
	c := b.consumer(t)
	for _, raw := range [][]byte{nil, {}} {
		results, err := c.Deliver(context.Background(), raw, 1)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.Rejected, results[0].Outcome, results[0].Reason)
	}
}

// A Decide call's slot is the call's: it is given back once Decide
// returns, not once its decision is recorded. With one slot and the
// store's writer held elsewhere (another process's write lock) when the
// first call answers, the second message is asked while the first's
// record waits for the writer; the slot held through the record made
// every call wait for the commit of the one before it (issue 37).
func TestDecideSlotIsFreedWhenDecideReturns(t *testing.T) {
	b := setup(t)
	other, err := sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	var (
		mu     sync.Mutex
		held   *sql.Tx
		asked  []string
		second = make(chan struct{})
	)
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		if held != nil {
			held.Rollback()
			held = nil
		}
	}
	t.Cleanup(release)
	b.cfg.DecideConcurrency = 1
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		mu.Lock()
		asked = append(asked, ev.ID)
		n := len(asked)
		mu.Unlock()
		if n == 1 {
			// The first answer: its record will wait for the writer, which
			// another process takes now.
			tx, err := other.Begin() // BEGIN IMMEDIATE: the write lock
			if err != nil {
				return nil, err
			}
			mu.Lock()
			held = tx
			mu.Unlock()
			go func() {
				// Should the second call never come (the slot held through the
				// first's record), the lock is let go so that the test ends,
				// and fails below.
				if !waitfor.Until(10*time.Second, func() bool {
					select {
					case <-second:
						return true
					default:
						return false
					}
				}) {
					release()
				}
			}()
			return []byte("d-" + ev.ID), nil
		}
		// The second call, while the first's record still waits.
		mu.Lock()
		stillHeld := held != nil
		mu.Unlock()
		close(second)
		release()
		if !stillHeld {
			return nil, errors.New("asked only once the first decision's record was through")
		}
		return []byte("d-" + ev.ID), nil
	}
	c := b.consumer(t)
	out, err := c.DeliverBatch(context.Background(), [][]byte{keyed("m1", "k1", 1), keyed("m2", "k2", 1)})
	require.NoError(t, err)
	for i, results := range out {
		require.Equal(t, seqboxtype.Applied, results[0].Outcome, "message %d: %s", i+1, results[0].Reason)
	}
	require.Len(t, asked, 2)
}
