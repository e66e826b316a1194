package seqbox

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// scheduler groups received deliveries by key and hands workers batches in
// which every key is pinned to that worker until the batch is done. Keys
// wait in a FIFO ready list, so each key gets its turn.
type scheduler struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending map[string][]transport.Delivery
	busy    map[string]bool
	// live is every delivery received and not yet done, for lease
	// extension, with when it was received.
	live map[transport.Delivery]time.Time
	// parsed holds the envelopes the receiver parsed, until a batch takes
	// their deliveries (batch.parsed).
	parsed   map[transport.Delivery]*parsedEnvelope
	ready    []string
	inFlight int
	limit    int
	closed   bool
	// takers counts the workers inside take: the ready deliveries are
	// shared among them, unless oneBatch.
	takers int
	// oneBatch runs one batch at a time, holding everything ready (up to
	// its size), for a store with one writer at a time (SQLite): there,
	// batches taken side by side commit one after the other anyway, and
	// a batch holds the write lock from BEGIN to COMMIT. A second batch
	// taken while the first runs would only wait for it, with a share of
	// what the first would otherwise have taken next and a fixed cost of
	// its own; left alone, the deliveries arriving meanwhile make the
	// next batch: group commit.
	oneBatch bool
	// running counts the batches taken and not yet done.
	running int
	// groupWait is group commit for a store that runs batches side by side
	// (PostgreSQL): while a batch runs, a worker starts another only
	// once a full batch (the sizer's cap) is ready, or the oldest ready
	// delivery has waited groupWait. Deliveries that arrive during a batch
	// then make one batch after it, not a batch each in parallel: every
	// batch pays a fixed cost (its round trips, its commit's flush), and
	// a light load of many small parallel batches paid it for every few
	// messages. Zero: a worker starts as soon as anything is ready.
	groupWait time.Duration
	// wake broadcasts when the oldest ready delivery's group wait ends.
	wake *time.Timer
}

// batch is the work one worker took: deliveries, and the key of each.
type batch struct {
	keys       []string
	deliveries []transport.Delivery
	dkeys      []string
	// parsed is each delivery's envelope as the receiver parsed it (nil
	// when it was added without).
	parsed   []*parsedEnvelope
	unpinned map[string]bool
}

// parsedEnvelope is a delivery's body parsed once, by the receiver: it
// gives the scheduling key, and the batch's pipeline uses it as is.
type parsedEnvelope struct {
	ev  seqboxtype.Event
	err error
}

func newScheduler(limit int) *scheduler {
	s := &scheduler{pending: map[string][]transport.Delivery{}, busy: map[string]bool{},
		live: map[transport.Delivery]time.Time{}, parsed: map[transport.Delivery]*parsedEnvelope{}, limit: limit}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// add adds one delivery under key.
func (s *scheduler) add(key string, d transport.Delivery) {
	s.addMany([]string{key}, []transport.Delivery{d}, nil)
}

// addMany adds what one receive returned (ds[i] under keys[i], with
// parsed[i] its envelope when parsed is not nil) at once, then wakes the
// workers: one waiting for work takes the receive as one batch (or its
// share of it), not the first few deliveries added while the rest wait
// for the next batch and its fixed cost.
func (s *scheduler) addMany(keys []string, ds []transport.Delivery, parsed []*parsedEnvelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for i, d := range ds {
		var pe *parsedEnvelope
		if parsed != nil {
			pe = parsed[i]
		}
		s.addLocked(keys[i], d, pe, now)
	}
	s.cond.Broadcast()
}

// addLocked adds d under key, received at now, with pe its envelope
// when parsed (else nil).
func (s *scheduler) addLocked(key string, d transport.Delivery, pe *parsedEnvelope, now time.Time) {
	if len(s.pending[key]) == 0 && !s.busy[key] {
		s.ready = append(s.ready, key)
	}
	s.pending[key] = append(s.pending[key], d)
	s.live[d] = now
	if pe != nil {
		s.parsed[d] = pe
	}
	s.inFlight++
}

// closeOn wakes every waiter for good once ctx ends; call the returned
// function when done waiting.
func (s *scheduler) closeOn(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.closed = true
		s.cond.Broadcast()
		s.mu.Unlock()
	})
}

// waitRoom blocks while too many deliveries are in flight; false once the
// context ends.
func (s *scheduler) waitRoom(ctx context.Context) bool {
	defer s.closeOn(ctx)()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.inFlight >= s.limit && !s.closed {
		s.cond.Wait()
	}
	return !s.closed
}

// take waits for ready keys and returns up to size deliveries from them,
// at most half the batch from any one key, so that one hot key shares a
// batch with others. It returns nil once the context ends.
// take hands out the next batch: at most size deliveries, or what sizer
// allows while the oldest ready delivery is within the target latency.
func (s *scheduler) take(ctx context.Context, size int, sizer *batchSizer) *batch {
	defer s.closeOn(ctx)()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.takers++
	defer func() { s.takers-- }()
	for !s.closed && !s.mayStart(size, sizer) {
		s.cond.Wait()
	}
	if s.closed {
		return nil
	}
	if limit := sizer.limit(s.oldestWait()); limit > 0 {
		size = min(size, limit)
	}
	// What is ready is shared among the idle workers, so that a load
	// runs in parallel batches. With a group wait (group commit) only a full
	// batch's worth is shared: less is taken whole, and the next worker
	// starts when a full batch is ready, or a group wait later. With one writer
	// (oneBatch) a worker takes all it may.
	if ready := s.readyCount(); !s.oneBatch && (s.groupWait <= 0 || ready >= size) {
		size = min(size, max(1, (ready+s.takers-1)/s.takers))
	}
	perKey := max(1, size/2)
	s.running++
	b := &batch{}
	byKey := map[string][]transport.Delivery{}
	taken := 0
	for len(s.ready) > 0 && taken < size {
		key := s.ready[0]
		s.ready = s.ready[1:]
		q := s.pending[key]
		n := min(len(q), perKey, size-taken)
		taken += n
		s.pending[key] = q[n:]
		s.busy[key] = true
		b.keys = append(b.keys, key)
		byKey[key] = append(byKey[key], q[:n]...)
	}
	// Within the batch, keys go in sorted order, so that two transactions
	// (in any processes) lock the keys they share in the same order and
	// cannot deadlock on them. A key's own deliveries keep their order.
	sort.Strings(b.keys)
	for _, key := range b.keys {
		for _, d := range byKey[key] {
			b.deliveries = append(b.deliveries, d)
			b.dkeys = append(b.dkeys, key)
			b.parsed = append(b.parsed, s.parsed[d])
			delete(s.parsed, d)
		}
	}
	return b
}

// mayStart reports whether a worker in take may start a batch now; when
// only the group wait stands in the way, it arms the wake-up for its end.
func (s *scheduler) mayStart(size int, sizer *batchSizer) bool {
	switch {
	case len(s.ready) == 0:
		return false
	case s.oneBatch:
		return s.running == 0
	case s.groupWait <= 0 || s.running == 0:
		return true
	}
	wait := s.oldestWait()
	if wait >= s.groupWait {
		return true
	}
	if limit := sizer.limit(wait); limit > 0 {
		size = min(size, limit)
	}
	if s.readyCount() >= size {
		return true
	}
	if s.wake == nil {
		s.wake = time.AfterFunc(s.groupWait-wait, func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
	} else {
		s.wake.Reset(s.groupWait - wait)
	}
	return false
}

// stop stops the group wait's wake-up, once no worker takes any more.
func (s *scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake != nil {
		s.wake.Stop()
	}
}

// readyCount is how many deliveries wait in ready keys.
func (s *scheduler) readyCount() int {
	n := 0
	for _, key := range s.ready {
		n += len(s.pending[key])
	}
	return n
}

// oldestWait is how long the first ready key's first delivery has waited
// since it was received.
func (s *scheduler) oldestWait() time.Duration {
	return time.Since(s.live[s.pending[s.ready[0]][0]])
}

// unpinEarly unpins keys of b before the batch is done (their part of the
// batch committed while a slow decision holds the rest).
func (s *scheduler) unpinEarly(b *batch, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.unpinned == nil {
		b.unpinned = map[string]bool{}
	}
	for _, key := range keys {
		if b.unpinned[key] {
			continue
		}
		b.unpinned[key] = true
		s.unpin(key)
	}
	s.cond.Broadcast()
}

// adopt hands b the next delivery received for key, which b has pinned,
// as if b had taken it: the decide pipe runs a key's next message in the
// transaction that ends its predecessor, instead of unpinning the key for
// a worker to take it and commit its turn in a transaction of its own.
func (s *scheduler) adopt(b *batch, key string) (transport.Delivery, *parsedEnvelope, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.pending[key]
	if len(q) == 0 || !s.busy[key] || b.unpinned[key] {
		return nil, nil, false
	}
	d := q[0]
	if len(q) == 1 {
		delete(s.pending, key)
	} else {
		s.pending[key] = q[1:]
	}
	pe := s.parsed[d]
	delete(s.parsed, d)
	b.deliveries = append(b.deliveries, d)
	b.dkeys = append(b.dkeys, key)
	b.parsed = append(b.parsed, pe)
	return d, pe, true
}

// adoptTaken hands b a delivery of key taken outside a receive, the next
// of its group (transport.NextTaker), as adopt hands b one received
// already, when join; it reports whether b took it. Without join, or
// when b does not hold key, or the scheduler holds deliveries of key
// received since, it is added as received instead, behind them.
func (s *scheduler) adoptTaken(b *batch, key string, d transport.Delivery, pe *parsedEnvelope, join bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !join || !s.busy[key] || b.unpinned[key] || len(s.pending[key]) > 0 || !slices.Contains(b.keys, key) {
		s.addLocked(key, d, pe, time.Now())
		s.cond.Broadcast()
		return false
	}
	s.live[d] = time.Now()
	s.inFlight++
	b.deliveries = append(b.deliveries, d)
	b.dkeys = append(b.dkeys, key)
	b.parsed = append(b.parsed, pe)
	return true
}

// unpin frees a key; with more deliveries it goes to the back of the line.
func (s *scheduler) unpin(key string) {
	delete(s.busy, key)
	if len(s.pending[key]) > 0 {
		s.ready = append(s.ready, key)
	} else {
		delete(s.pending, key)
	}
}

// done unpins a batch's keys; keys with more deliveries go to the back of
// the ready list.
func (s *scheduler) done(b *batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight -= len(b.deliveries)
	s.running--
	for _, d := range b.deliveries {
		delete(s.live, d)
	}
	for _, key := range b.keys {
		if !b.unpinned[key] {
			s.unpin(key)
		}
	}
	s.cond.Broadcast()
}

// idle reports whether every delivery received is done.
func (s *scheduler) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live) == 0
}

// held returns every delivery received and not yet done.
func (s *scheduler) held() []transport.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]transport.Delivery, 0, len(s.live))
	for d := range s.live {
		out = append(out, d)
	}
	return out
}

// abandon returns every delivery not yet taken, for nacking at shutdown.
func (s *scheduler) abandon() []transport.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []transport.Delivery
	for _, q := range s.pending {
		out = append(out, q...)
	}
	s.pending = map[string][]transport.Delivery{}
	s.parsed = map[transport.Delivery]*parsedEnvelope{}
	s.ready = nil
	return out
}
