package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

// stage is one database holding a store, an outbox and, for the
// downstream stage, the effects of what it consumed.
type stage struct {
	where string
	st    store.Store
}

// stages runs fn on SQLite and on PostgreSQL.
func stages(t *testing.T, fn func(t *testing.T, where func(t *testing.T) string)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "seqbox.db") })
	})
	t.Run("postgres", func(t *testing.T) { fn(t, func(t *testing.T) string { return pgtest.URL(t) }) })
}

func openStage(t *testing.T, where string) *stage {
	t.Helper()
	var st store.Store
	var err error
	if strings.HasPrefix(where, "postgres") {
		st, err = postgres.Open(context.Background(), where)
	} else {
		st, err = sqlite.Open(context.Background(), where)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.DB().Exec(`CREATE TABLE IF NOT EXISTS shipped (id TEXT, pkey TEXT, version BIGINT)`)
	require.NoError(t, err)
	return &stage{where: where, st: st}
}

func event(key string, v int) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-v%d","source":"orders","type":"order.changed","partitionkey":%q,"objectversion":%d}`, key, v, key, v)
}

// emitAll emits events in one transaction per key version, as handlers do.
func emitAll(t *testing.T, s *stage, keys, versions int) {
	t.Helper()
	ctx := context.Background()
	for v := 1; v <= versions; v++ {
		tx, err := s.st.DB().Begin()
		require.NoError(t, err)
		ctx := outbox.WithTx(ctx, s.st.UnwrapTx(tx))
		for k := range keys {
			require.NoError(t, outbox.Emit(ctx, tx, event(fmt.Sprintf("ord-%d", k), v)))
		}
		require.NoError(t, tx.Commit())
	}
}

// downstream consumes the queue into its shipped table until idle, and
// returns each key's applied versions and the duplicates seen. Every key
// starts at version 1, so an event published out of order would be held,
// and one published twice is a duplicate.
func downstream(t *testing.T, s *stage, q *embedded.Queue) (map[string][]int64, int) {
	t.Helper()
	var mu sync.Mutex
	dups := 0
	first := int64(1)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "shipping", Store: s.st, Transport: q, Policies: seqbox.Policies{FirstVersion: &first},
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			v, _ := ev.Version()
			_, err := tx.ExecContext(ctx, `INSERT INTO shipped (id, pkey, version) VALUES ($1, $2, $3)`, ev.ID, ev.PartitionKey, v)
			return err
		},
		Observer: func(res seqboxtype.Result) {
			if res.Outcome == seqboxtype.Duplicate {
				mu.Lock()
				dups++
				mu.Unlock()
			}
		}})
	require.NoError(t, err)
	require.NoError(t, c.RunUntilIdle(context.Background(), 500*time.Millisecond))
	rows, err := s.st.DB().Query(`SELECT pkey, version FROM shipped ORDER BY pkey, version`)
	require.NoError(t, err)
	defer rows.Close()
	got := map[string][]int64{}
	for rows.Next() {
		var k string
		var v int64
		require.NoError(t, rows.Scan(&k, &v))
		got[k] = append(got[k], v)
	}
	return got, dups
}

// exactlyOnce fails unless every key got 1..versions once each.
func exactlyOnce(t *testing.T, got map[string][]int64, keys, versions int) {
	t.Helper()
	require.Len(t, got, keys)
	for k, vs := range got {
		require.Len(t, vs, versions, "key %s: %v", k, vs)
		seen := map[int64]bool{}
		for _, v := range vs {
			require.False(t, seen[v], "key %s applied version %d twice", k, v)
			seen[v] = true
		}
	}
}

func openQueue(t *testing.T, where string) *embedded.Queue {
	t.Helper()
	q, err := embedded.Open(context.Background(), where, embedded.Config{Name: "downstream", PollInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func TestRelayPublishesEveryEventOnceInKeyOrder(t *testing.T) {
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		emitAll(t, up, 5, 20)
		q := openQueue(t, up.where)
		pub := &recorder{inner: q}
		r, err := outbox.NewRelay(up.st, pub, outbox.Config{Batch: 32})
		require.NoError(t, err)
		for {
			n, err := r.RunOnce(context.Background())
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
		waiting, _, err := r.Pending(context.Background())
		require.NoError(t, err)
		require.Zero(t, waiting)
		pub.inOrder(t)
		require.Len(t, pub.bodies, 100)
		got, dups := downstream(t, up, q)
		exactlyOnce(t, got, 5, 20)
		require.Zero(t, dups)
	})
}

// recorder publishes through inner and records what it published.
type recorder struct {
	inner interface {
		Publish(context.Context, []byte) error
	}
	mu     sync.Mutex
	bodies []string
	fail   func(body []byte) error
}

func (p *recorder) Publish(ctx context.Context, body []byte) error {
	if p.fail != nil {
		if err := p.fail(body); err != nil {
			return err
		}
	}
	if err := p.inner.Publish(ctx, body); err != nil {
		return err
	}
	p.mu.Lock()
	p.bodies = append(p.bodies, string(body))
	p.mu.Unlock()
	return nil
}

// inOrder fails unless each key's first publications are in version order.
func (p *recorder) inOrder(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	top := map[string]int64{}
	for _, b := range p.bodies {
		ev, err := seqboxtype.ParseEvent([]byte(b))
		require.NoError(t, err)
		v, _ := ev.Version()
		if v <= top[ev.PartitionKey] {
			continue // a republication
		}
		require.Equal(t, top[ev.PartitionKey]+1, v, "key %s published v%d after v%d", ev.PartitionKey, v, top[ev.PartitionKey])
		top[ev.PartitionKey] = v
	}
}

func TestAFailingKeyDoesNotStallTheOthers(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	emitAll(t, up, 4, 5)
	q := openQueue(t, up.where)
	failures := 0
	pub := &recorder{inner: q, fail: func(body []byte) error {
		if strings.Contains(string(body), `"ord-2-v3"`) && failures < 3 {
			failures++
			return errors.New("broker unavailable for this key")
		}
		return nil
	}}
	clk := newClock()
	r, err := outbox.NewRelay(up.st, pub, outbox.Config{Now: clk.Now})
	require.NoError(t, err)
	n, err := r.RunOnce(context.Background())
	require.ErrorContains(t, err, "broker unavailable")
	require.Equal(t, 17, n, "every key but ord-2 published fully; ord-2 stopped before v3")
	var attempts int
	var lastErr string
	require.NoError(t, up.st.DB().QueryRow(`SELECT attempts, last_error FROM seqbox_outbox WHERE event_id = 'ord-2-v3'`).Scan(&attempts, &lastErr))
	require.Equal(t, 1, attempts)
	require.Contains(t, lastErr, "broker unavailable")
	for range 5 {
		clk.Advance(time.Minute) // past the key's backoff
		_, _ = r.RunOnce(context.Background())
	}
	waiting, _, err := r.Pending(context.Background())
	require.NoError(t, err)
	require.Zero(t, waiting)
	pub.inOrder(t)
	got, _ := downstream(t, up, q)
	exactlyOnce(t, got, 4, 5)
	require.Equal(t, []int64{1, 2, 3, 4, 5}, got["ord-2"])
}

// A publisher that panics is a refusal of that event, not the end of the
// process: the relay's goroutine recovers it, records the panic as the
// event's error, and the key waits for it as for any refusal. Before,
// the panic escaped a goroutine of the relay and nobody could recover it.
func TestAPanickingPublisherIsARefusal(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	emitAll(t, up, 2, 2)
	q := openQueue(t, up.where)
	panicked := false
	pub := &recorder{inner: q, fail: func(body []byte) error {
		if strings.Contains(string(body), `"ord-1-v1"`) && !panicked {
			panicked = true
			panic("publisher crashed")
		}
		return nil
	}}
	clk := newClock()
	r, err := outbox.NewRelay(up.st, pub, outbox.Config{Now: clk.Now})
	require.NoError(t, err)
	n, err := r.RunOnce(context.Background())
	require.ErrorContains(t, err, "publisher crashed")
	require.Equal(t, 2, n, "ord-2 published; ord-1 stopped at v1")
	var lastErr string
	require.NoError(t, up.st.DB().QueryRow(`SELECT last_error FROM seqbox_outbox WHERE event_id = 'ord-1-v1'`).Scan(&lastErr))
	require.Contains(t, lastErr, "panic: publisher crashed")
	clk.Advance(time.Minute)
	_, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	got, _ := downstream(t, up, q)
	exactlyOnce(t, got, 2, 2)
}

func TestOneRelayAtATime(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	emitAll(t, up, 1, 3)
	q := openQueue(t, up.where)
	now := time.Now()
	clock := func() time.Time { return now }
	a, err := outbox.NewRelay(up.st, q, outbox.Config{Lease: time.Minute, Now: clock})
	require.NoError(t, err)
	b, err := outbox.NewRelay(up.st, q, outbox.Config{Lease: time.Minute, Now: clock})
	require.NoError(t, err)
	n, err := a.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	emitAll(t, up, 1, 1)
	n, err = b.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "the standby waits while the active relay's lease runs")
	now = now.Add(2 * time.Minute)
	n, err = b.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the standby takes over once the lease expired")
	require.NoError(t, b.Release(context.Background()))
	_, err = a.RunOnce(context.Background())
	require.NoError(t, err)
}

func TestEmitRefusesAnInvalidEvent(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	tx, err := up.st.DB().Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	err = outbox.Emit(outbox.WithTx(context.Background(), up.st.UnwrapTx(tx)), tx, []byte(`{"specversion":"1.0","id":"x","source":"s","type":"t","objectversion":"v3"}`))
	require.ErrorIs(t, err, seqboxtype.ErrInvalidEvent)
	require.ErrorContains(t, err, "objectversion")
	var n int
	require.NoError(t, tx.QueryRow(`SELECT COUNT(*) FROM seqbox_outbox`).Scan(&n))
	require.Zero(t, n)
}

func TestNewRelayValidates(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	q := openQueue(t, up.where)
	_, err := outbox.NewRelay(nil, q, outbox.Config{})
	require.ErrorContains(t, err, "store")
	_, err = outbox.NewRelay(up.st, q, outbox.Config{Lease: -time.Second})
	require.ErrorContains(t, err, "Lease")
	_, err = outbox.NewRelay(up.st, q, outbox.Config{Batch: -1})
	require.ErrorContains(t, err, "Batch")
	_, err = outbox.NewRelay(up.st, q, outbox.Config{Backoff: -time.Second})
	require.ErrorContains(t, err, "Backoff")
	_, err = outbox.NewRelay(up.st, q, outbox.Config{Backoff: time.Minute, MaxBackoff: time.Second})
	require.ErrorContains(t, err, "MaxBackoff")
	_, err = outbox.NewRelay(up.st, q, outbox.Config{Backoff: time.Hour})
	require.NoError(t, err, "MaxBackoff defaults to Backoff when that is longer than a minute")
}

// Emit outside a Handler, with no transaction in ctx, says so and writes
// nothing; a tx other than the one ctx carries is refused.
func TestEmitNeedsTheTransactionInContext(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	elsewhere := openStage(t, filepath.Join(t.TempDir(), "other.db"))
	ev := event("ord-1", 1)
	ctx := context.Background()

	tx, err := elsewhere.st.DB().Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	err = outbox.Emit(ctx, tx, ev)
	require.ErrorIs(t, err, outbox.ErrNoTransaction)
	require.ErrorContains(t, err, "no seqbox transaction")

	etx, err := up.st.Begin(ctx)
	require.NoError(t, err)
	defer etx.Rollback()
	err = outbox.Emit(outbox.WithTx(ctx, etx), tx, ev)
	require.ErrorContains(t, err, "not the transaction ctx carries")
	var n int
	require.NoError(t, etx.SQL().QueryRow(`SELECT COUNT(*) FROM seqbox_outbox`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, tx.QueryRow(`SELECT COUNT(*) FROM seqbox_outbox`).Scan(&n))
	require.Zero(t, n)

	require.NoError(t, outbox.Emit(outbox.WithTx(ctx, etx), etx.SQL(), ev))
	require.NoError(t, etx.SQL().QueryRow(`SELECT COUNT(*) FROM seqbox_outbox`).Scan(&n))
	require.Equal(t, 1, n)
}
