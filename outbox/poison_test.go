package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

// newClock is a test clock that moves only when told.
func newClock() *testclock.Clock { return testclock.At(time.Unix(1_700_000_000, 0)) }

// syncBuffer is a log sink the relay's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// emitKey emits versions 1..n of key, one transaction each.
func emitKey(t *testing.T, s *stage, key string, n int) {
	t.Helper()
	for v := 1; v <= n; v++ {
		tx, err := s.st.DB().Begin()
		require.NoError(t, err)
		require.NoError(t, outbox.Emit(outbox.WithTx(context.Background(), s.st.UnwrapTx(tx)), tx, event(key, v)))
		require.NoError(t, tx.Commit())
	}
}

// rounds runs relay rounds until one publishes nothing and fails nothing
// (at most max), and returns how many events they published.
func rounds(t *testing.T, r *outbox.Relay, max int) int {
	t.Helper()
	total := 0
	for range max {
		n, err := r.RunOnce(context.Background())
		total += n
		if n == 0 && err == nil {
			break
		}
	}
	return total
}

// published counts the recorder's publications per key.
func (p *recorder) published() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, b := range p.bodies {
		ev, err := seqboxtype.ParseEvent([]byte(b))
		if err == nil {
			out[ev.PartitionKey]++
		}
	}
	return out
}

// More refused events of one key than a round reads sit at the head of
// the outbox, the other keys' events behind them. The other keys are
// published all the same; the refused key's later events are never tried
// ahead of its head, which is retried (after its backoff), recorded and
// logged; once the publisher takes it, the key's events follow in order.
func TestPoisonKeyAtTheHeadDoesNotStopTheOtherKeys(t *testing.T) {
	const batch = 4
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		emitKey(t, up, "poison", 3*batch) // the whole head, three rounds deep
		emitAll(t, up, 3, 5)              // ord-0..ord-2, v1..v5, behind it
		q := openQueue(t, up.where)
		pub, refuse, tried := poisonPublisher(q)
		clk := newClock()
		logs := &syncBuffer{}
		r, err := outbox.NewRelay(up.st, pub, outbox.Config{Batch: batch, Parallel: 2, Now: clk.Now,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)

		// The first round reads only the poison key's head and is refused;
		// the next rounds read past the key.
		rounds(t, r, 20)
		require.Equal(t, map[string]int{"ord-0": 5, "ord-1": 5, "ord-2": 5}, pub.published(),
			"every other key is published past the refused head")
		waiting, _, err := r.Pending(context.Background())
		require.NoError(t, err)
		require.Equal(t, 3*batch, waiting, "only the poison key waits")
		var attempts int
		var lastErr string
		require.NoError(t, up.st.DB().QueryRow(`SELECT attempts, last_error FROM seqbox_outbox WHERE event_id = 'poison-v1'`).Scan(&attempts, &lastErr))
		require.Equal(t, 1, attempts)
		require.Contains(t, lastErr, "message too large")
		require.Contains(t, logs.String(), "event=poison-v1")
		require.Contains(t, logs.String(), "key=poison")

		// Retried, and refused again: still nothing of the key overtakes it.
		emitKey(t, up, "after", 2)
		clk.Advance(time.Hour)
		rounds(t, r, 20)
		require.Equal(t, 2, pub.published()["after"])
		require.NoError(t, up.st.DB().QueryRow(`SELECT attempts FROM seqbox_outbox WHERE event_id = 'poison-v1'`).Scan(&attempts))
		require.Equal(t, 2, attempts)
		require.Zero(t, pub.published()["poison"])
		require.Equal(t, []string{"poison-v1", "poison-v1"}, tried(), "only the key's head is ever tried while it is refused")

		// The publisher takes the key again: its events follow, in order.
		refuse.Store(false)
		clk.Advance(time.Hour)
		require.Equal(t, 3*batch, rounds(t, r, 20))
		waiting, _, err = r.Pending(context.Background())
		require.NoError(t, err)
		require.Zero(t, waiting)
		pub.inOrder(t)
		got, _ := downstream(t, up, q)
		want := map[string][]int64{"poison": seq(3 * batch), "after": seq(2)}
		for k := range 3 {
			want[fmt.Sprintf("ord-%d", k)] = seq(5)
		}
		require.Equal(t, want, got)
	})
}

// A refused head is retried when its backoff runs out, the backoff
// doubling up to MaxBackoff, while the other keys keep flowing; the
// relay counts the refusals and lists the refused heads.
func TestRefusedHeadBacksOff(t *testing.T) {
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		emitKey(t, up, "poison", 3)
		q := openQueue(t, up.where)
		pub, refuse, tried := poisonPublisher(q)
		clk := newClock()
		r, err := outbox.NewRelay(up.st, pub, outbox.Config{Batch: 2, Now: clk.Now,
			Backoff: time.Second, MaxBackoff: 10 * time.Second,
			Logger: slog.New(slog.NewTextHandler(&syncBuffer{}, nil))})
		require.NoError(t, err)
		n, err := r.RunOnce(context.Background())
		require.Zero(t, n)
		require.ErrorContains(t, err, "message too large")
		require.Equal(t, outbox.Stats{Refused: 1}, r.Stats())
		refusals, err := r.Refusals(context.Background())
		require.NoError(t, err)
		require.Len(t, refusals, 1)
		require.Equal(t, "poison", refusals[0].Key)
		require.Equal(t, "poison-v1", refusals[0].EventID)
		require.Equal(t, 1, refusals[0].Attempts)
		require.Contains(t, refusals[0].LastError, "message too large")
		require.Equal(t, clk.Now().Add(time.Second), refusals[0].NextAttempt)

		attempts := func() int {
			var a int
			require.NoError(t, up.st.DB().QueryRow(`SELECT attempts FROM seqbox_outbox WHERE event_id = 'poison-v1'`).Scan(&a))
			return a
		}
		for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
			emitKey(t, up, fmt.Sprintf("late-%d", i), 2)
			clk.Advance(wait - time.Millisecond)
			require.Equal(t, 2, rounds(t, r, 5), "step %d: the new key is published, the head still waits", i)
			require.Equal(t, i+1, attempts(), "step %d: no retry before the backoff ran out", i)
			clk.Advance(time.Millisecond)
			require.Zero(t, rounds(t, r, 5), "step %d: the head is retried and refused again", i)
			require.Equal(t, i+2, attempts(), "step %d", i)
		}
		require.Equal(t, outbox.Stats{Published: 12, Refused: 7}, r.Stats())
		require.NoError(t, testutil.CollectAndCompare(outbox.NewCollector(r), strings.NewReader(`
# HELP seqbox_outbox_refused_keys Partition keys held up by an event the publisher refused (see Relay.Refusals).
# TYPE seqbox_outbox_refused_keys gauge
seqbox_outbox_refused_keys{relay="default"} 1
# HELP seqbox_outbox_refused_max_attempts Most refusals of one event still unpublished.
# TYPE seqbox_outbox_refused_max_attempts gauge
seqbox_outbox_refused_max_attempts{relay="default"} 7
# HELP seqbox_outbox_refused_total Publish attempts the publisher refused; the refused event's key backs off.
# TYPE seqbox_outbox_refused_total counter
seqbox_outbox_refused_total{relay="default"} 7
# HELP seqbox_outbox_pending Outbox events not yet published.
# TYPE seqbox_outbox_pending gauge
seqbox_outbox_pending{relay="default"} 3
`), "seqbox_outbox_refused_keys", "seqbox_outbox_refused_max_attempts", "seqbox_outbox_refused_total", "seqbox_outbox_pending"))
		require.Len(t, tried(), 7)

		refuse.Store(false)
		clk.Advance(10 * time.Second)
		require.Equal(t, 3, rounds(t, r, 5))
		refusals, err = r.Refusals(context.Background())
		require.NoError(t, err)
		require.Empty(t, refusals)
		require.Equal(t, outbox.Stats{Published: 15, Refused: 7}, r.Stats())
		pub.inOrder(t)
	})
}

// poisonPublisher publishes to q but refuses the key "poison" while
// refuse is set (it starts set); tried lists the poison events it was
// handed, in order.
func poisonPublisher(q *embedded.Queue) (pub *recorder, refuse *atomic.Bool, tried func() []string) {
	refuse = &atomic.Bool{}
	refuse.Store(true)
	var mu sync.Mutex
	var ids []string
	pub = &recorder{inner: q, fail: func(body []byte) error {
		ev, err := seqboxtype.ParseEvent(body)
		if err != nil || ev.PartitionKey != "poison" {
			return err
		}
		mu.Lock()
		ids = append(ids, ev.ID)
		mu.Unlock()
		if refuse.Load() {
			return errors.New("broker rejects poison: message too large")
		}
		return nil
	}}
	return pub, refuse, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
}

func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}
