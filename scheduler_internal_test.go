package seqbox

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport"
)

// stub is a delivery the scheduler only files; it is never settled.
type stub struct {
	name string
	body []byte
}

func (s *stub) Body() []byte                                { return s.body }
func (s *stub) Attempt() int                                { return 1 }
func (s *stub) Ack(context.Context) error                   { return nil }
func (s *stub) Nack(context.Context, time.Duration) error   { return nil }
func (s *stub) Extend(context.Context, time.Duration) error { return nil }

func names(b *batch) []string {
	out := make([]string, len(b.deliveries))
	for i, d := range b.deliveries {
		out[i] = d.(*stub).name
	}
	return out
}

// A batch takes at most half of itself from one key, a key is pinned to the
// batch that holds it, and a busy key goes to the back of the line.
func TestSchedulerSharesBatchesAndPinsKeys(t *testing.T) {
	s := newScheduler(100)
	ctx := context.Background()
	for i := range 10 {
		s.add("k:hot", &stub{name: "hot" + string(rune('0'+i))})
	}
	s.add("k:a", &stub{name: "a0"})
	s.add("k:b", &stub{name: "b0"})

	first := s.take(ctx, 4, nil)
	require.Equal(t, []string{"a0", "b0", "hot0", "hot1"}, names(first), "keys sorted; hot limited to half")
	// hot is pinned by the first batch: a second worker gets nothing from it.
	s.add("k:c", &stub{name: "c0"})
	second := s.take(ctx, 4, nil)
	require.Equal(t, []string{"c0"}, names(second))
	s.done(second)
	s.done(first)
	third := s.take(ctx, 4, nil)
	require.Equal(t, []string{"hot2", "hot3"}, names(third))

	// Releasing a key early (its part of a batch committed) lets another
	// worker take its next deliveries at once.
	s.add("k:a", &stub{name: "a1"})
	s.unpinEarly(third, []string{"k:hot"})
	fourth := s.take(ctx, 4, nil)
	require.Equal(t, []string{"a1", "hot4", "hot5"}, names(fourth))
	s.done(third) // a released key is not unpinned twice
	require.True(t, s.busy["k:hot"], "hot belongs to the fourth batch now")
}

// A batch holds at most its size, the last key it reaches giving only
// what is left of it, and a key it takes nothing from stays ready for
// the next worker (mutants of take's bounds survived every test before
// this one: a batch one key larger than its size, and a key pinned by a
// batch that took none of its deliveries).
func TestSchedulerBatchHoldsAtMostItsSize(t *testing.T) {
	s := newScheduler(100)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d"} {
		for i := range 3 {
			s.add("k:"+k, &stub{name: k + string(rune('0'+i))})
		}
	}
	first := s.take(ctx, 5, nil)
	require.Equal(t, []string{"a0", "a1", "b0", "b1", "c0"}, names(first), "two a key (half of five), then what is left")
	require.Equal(t, []string{"k:d"}, s.ready, "d, untouched, stays ready")
	second := s.take(ctx, 5, nil)
	require.Contains(t, names(second), "d0", "the next worker takes d")
}

// take returns nil once the context ends, and abandon hands back what was
// never taken, for nacking.
func TestSchedulerShutdown(t *testing.T) {
	s := newScheduler(100)
	s.add("k:a", &stub{name: "a0"})
	s.add("k:a", &stub{name: "a1"})
	ctx, cancel := context.WithCancel(context.Background())
	b := s.take(ctx, 1, nil)
	require.Equal(t, []string{"a0"}, names(b))
	cancel()
	require.Nil(t, s.take(ctx, 1, nil))
	left := s.abandon()
	require.Len(t, left, 1)
	require.Equal(t, "a1", left[0].(*stub).name)
}

// What is ready is shared among the workers waiting for it, unless the
// store has one writer (oneBatch): then the first worker takes it all,
// since its batch and the others' would commit one after the other.
func TestSchedulerSharesUnlessOneWriter(t *testing.T) {
	for _, c := range []struct {
		oneBatch bool
		want     int
	}{{false, 2}, {true, 8}} {
		s := newScheduler(100)
		s.oneBatch = c.oneBatch
		for i := range 8 {
			s.add("k:"+string(rune('a'+i)), &stub{name: string(rune('a' + i))})
		}
		s.takers = 3 // three other workers wait inside take
		b := s.take(context.Background(), 100, nil)
		require.Len(t, b.deliveries, c.want, "oneBatch=%v", c.oneBatch)
	}
}

// With one writer, a second batch is not taken while the first runs:
// what arrives meanwhile waits, and makes the next batch whole.
func TestSchedulerOneBatchAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(100)
		s.oneBatch = true
		ctx := context.Background()
		s.add("k:a", &stub{name: "a0"})
		first := s.take(ctx, 100, nil)
		require.Equal(t, []string{"a0"}, names(first))

		got := make(chan *batch, 1)
		go func() { got <- s.take(ctx, 100, nil) }()
		s.add("k:b", &stub{name: "b0"})
		s.add("k:c", &stub{name: "c0"})
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("a second batch %v was taken while the first ran", names(b))
		default:
		}
		s.done(first)
		synctest.Wait()
		require.Equal(t, []string{"b0", "c0"}, names(<-got), "what arrived meanwhile, in one batch")
	})
}

// Group commit on a store that runs batches side by side: while a batch
// runs, a second one starts only once a full batch is ready, the running
// one is done, or the oldest ready delivery has waited the group wait; and it
// takes everything ready, not a share.
func TestSchedulerGroupWaitDelaysASecondBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 5 * time.Millisecond
		ctx := context.Background()
		s := newScheduler(100)
		s.groupWait = wait
		defer s.stop()
		s.add("k:a", &stub{name: "a0"})
		s.add("k:b", &stub{name: "b0"})
		s.takers = 3 // three other workers wait inside take: no share with a group wait
		first := s.take(ctx, 4, nil)
		require.Equal(t, []string{"a0", "b0"}, names(first), "no batch runs: the first starts at once with all that is ready")
		s.takers = 0

		got := make(chan *batch, 1)
		take := func() { got <- s.take(ctx, 4, nil) }
		pending := func() bool {
			synctest.Wait()
			select {
			case b := <-got:
				t.Fatalf("a second batch %v started during the group wait", names(b))
			default:
			}
			return true
		}
		go take()
		start := time.Now()
		s.add("k:c", &stub{name: "c0"})
		require.True(t, pending())
		s.add("k:d", &stub{name: "d0"})
		require.True(t, pending())
		// Every goroutine now waits: the bubble's clock moves to the
		// the group wait's end, when the wake-up lets the second batch start.
		second := <-got
		require.Equal(t, []string{"c0", "d0"}, names(second), "the group wait's end: all that arrived during it")
		require.Equal(t, wait, time.Since(start), "it waited the oldest's group wait, no longer")

		go take()
		for _, k := range []string{"e", "f", "g"} {
			s.add("k:"+k, &stub{name: k + "0"})
		}
		require.True(t, pending())
		start = time.Now()
		s.add("k:h", &stub{name: "h0"})
		third := <-got
		require.Equal(t, []string{"e0", "f0", "g0", "h0"}, names(third))
		require.Zero(t, time.Since(start), "a full batch starts at once")

		go take()
		s.add("k:i", &stub{name: "i0"})
		require.True(t, pending())
		start = time.Now()
		s.done(first)
		s.done(second)
		require.True(t, pending(), "a batch still runs")
		s.done(third)
		require.Equal(t, []string{"i0"}, names(<-got))
		require.Zero(t, time.Since(start), "no batch runs: the group wait ends")
	})
}

// With a group wait, a full batch's worth or more is still shared among the
// idle workers, so that a load (a backlog's last batches among them)
// runs in parallel.
func TestSchedulerGroupWaitSharesAFullBatch(t *testing.T) {
	s := newScheduler(100)
	s.groupWait = 5 * time.Millisecond
	defer s.stop()
	for i := range 8 {
		s.add("k:"+string(rune('a'+i)), &stub{name: string(rune('a' + i))})
	}
	s.takers = 1 // another worker waits inside take
	b := s.take(context.Background(), 8, nil)
	require.Len(t, b.deliveries, 4, "half each")
}

// A worker waiting for work takes what one receive returned as one batch,
// not the first few deliveries added while the rest wait for the next.
func TestSchedulerTakesAReceiveWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(100)
		got := make(chan *batch, 1)
		go func() { got <- s.take(context.Background(), 100, nil) }()
		synctest.Wait() // the worker waits inside take
		var keys []string
		var ds []transport.Delivery
		for i := range 6 {
			keys = append(keys, "k:"+string(rune('a'+i)))
			ds = append(ds, &stub{name: string(rune('a' + i))})
		}
		s.addMany(keys, ds, nil)
		require.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, names(<-got))
		require.Equal(t, 6, s.inFlight)
	})
}

// The envelope the receiver parsed travels with its delivery into the
// batch, whatever order the batch puts the deliveries in, and is handed
// out once.
func TestSchedulerCarriesTheParsedEnvelope(t *testing.T) {
	s := newScheduler(100)
	keys := []string{"k:c", "k:a", "k:b"}
	ds := []transport.Delivery{&stub{name: "c0"}, &stub{name: "a0"}, &stub{name: "b0"}}
	parsed := make([]*parsedEnvelope, len(ds))
	for i, d := range ds {
		parsed[i] = &parsedEnvelope{ev: seqboxtype.Event{ID: d.(*stub).name}}
	}
	s.addMany(keys, ds, parsed)
	b := s.take(context.Background(), 100, nil)
	require.Equal(t, []string{"a0", "b0", "c0"}, names(b), "keys sorted")
	require.Len(t, b.parsed, 3)
	for i, d := range b.deliveries {
		require.Equal(t, d.(*stub).name, b.parsed[i].ev.ID)
	}
	require.Empty(t, s.parsed, "handed out with the batch")

	// A delivery added without a parse has none in its batch.
	s.done(b)
	s.add("k:c", &stub{name: "c0"})
	c := s.take(context.Background(), 100, nil)
	require.Equal(t, []*parsedEnvelope{nil}, c.parsed)
}

// The scheduling key of a valid envelope is its partitionkey, as parsed;
// one without a key gets a key of its own; a body the parser refuses keeps
// the partitionkey member it holds.
func TestDeliveryKey(t *testing.T) {
	p := &pipeline{cfg: Config{}}
	parse := func(raw []byte) *parsedEnvelope {
		ev, err := p.parse(raw)
		return &parsedEnvelope{ev: ev, err: err}
	}
	valid := &stub{body: []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","partitionkey":"k\u0031","objectversion":1}`)}
	require.Equal(t, "k:k1", deliveryKey(valid, parse(valid.Body())))
	unkeyed := &stub{body: []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t"}`)}
	u1, u2 := deliveryKey(unkeyed, parse(unkeyed.Body())), deliveryKey(unkeyed, parse(unkeyed.Body()))
	require.True(t, strings.HasPrefix(u1, "u:"), u1)
	require.NotEqual(t, u1, u2, "each unkeyed message is a key of its own")
	invalid := &stub{body: []byte(`{"id":"1","partitionkey":"k2"}`)}
	pe := parse(invalid.Body())
	require.Error(t, pe.err)
	require.Equal(t, "k:k2", deliveryKey(invalid, pe))
	require.Equal(t, "k:k2", deliveryKey(invalid, nil))
}

// SQLite's store says it has one writer; a store that does not say so
// shares out what is ready.
func TestOneWriterStores(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"))
	require.NoError(t, err)
	defer st.Close()
	require.True(t, oneWriter(st), "SQLite")
	require.False(t, oneWriter(nil))
}

// A delivery taken outside a receive and joined to a batch (the next of
// its group, transport.NextTaker) holds room as a received one does, and
// gives it back with the batch: the room stays the bound on deliveries in
// flight. Without its count, each such delivery gave back room it never
// took, and the receive loop went past its bound, lease after lease.
// One that is not joined (its key is not the batch's) waits as received,
// and holds room too.
func TestSchedulerCountsTheRoomOfATakenDelivery(t *testing.T) {
	s := newScheduler(4)
	ctx := context.Background()
	s.add("k:a", &stub{name: "a1"})
	b := s.take(ctx, 2, nil)
	require.Equal(t, []string{"a1"}, names(b))
	require.Equal(t, 1, s.inFlight)

	require.True(t, s.adoptTaken(b, "k:a", &stub{name: "a2"}, nil, true))
	require.Equal(t, []string{"a1", "a2"}, names(b))
	require.Equal(t, 2, s.inFlight, "the joined delivery holds room")
	require.False(t, s.adoptTaken(b, "k:other", &stub{name: "o1"}, nil, true), "not the batch's key")
	require.Equal(t, 3, s.inFlight, "filed as received, it holds room too")

	s.done(b)
	require.Equal(t, 1, s.inFlight, "the batch gave back what it held, the other still waits")
	c := s.take(ctx, 2, nil)
	require.Equal(t, []string{"o1"}, names(c))
	s.done(c)
	require.Zero(t, s.inFlight)
}
