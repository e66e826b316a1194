package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox/transport"
)

// Transport is one member of a Kafka consumer group. It hands out the
// records of the partitions it owns, commits per partition the
// contiguous prefix of acknowledged offsets, and redelivers nacked
// records itself. See the package documentation for what that promises.
type Transport struct {
	cfg Config
	cl  *kgo.Client

	// recvMu serialises Receive; commitMu serialises offset commits, so
	// they leave the member in order and a rebalance callback waits for
	// the commit in progress; mu guards the state below.
	recvMu   sync.Mutex
	commitMu sync.Mutex
	mu       sync.Mutex
	parts    map[topicPartition]*partition
	// ready holds records to hand out: fetched and not yet handed out, or
	// nacked and waiting for their delay.
	ready  []*entry
	closed bool
	// lastFailed is when a commit Receive retried last failed.
	lastFailed time.Time

	joined     chan struct{}
	joinedOnce sync.Once
}

var (
	_ transport.Transport  = (*Transport)(nil)
	_ transport.BatchAcker = (*Transport)(nil)
)

// Open joins the consumer group and returns once the member has its first
// assignment (which may be empty when the group has more members than the
// topic has partitions), or fails after Config.JoinTimeout.
func Open(ctx context.Context, cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Transport{cfg: cfg, parts: map[topicPartition]*partition{}, joined: make(chan struct{})}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		// Eager rebalancing: every rebalance revokes every partition of
		// every member before any is assigned again, so a partition has
		// one owner at a time and a member's old deliveries all lose
		// their lease together.
		kgo.Balancers(kgo.StickyBalancer()),
		// A rebalance waits until the records of a poll are registered,
		// so none is handed out for a partition already revoked.
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.OnPartitionsAssigned(t.onAssigned),
		kgo.OnPartitionsRevoked(t.onRevoked),
		kgo.OnPartitionsLost(t.onLost),
	}
	cl, err := kgo.NewClient(append(opts, cfg.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: open: %w", err)
	}
	t.cl = cl
	timer := time.NewTimer(cfg.JoinTimeout)
	defer timer.Stop()
	select {
	case <-t.joined:
		return t, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("no assignment within JoinTimeout (%s)", cfg.JoinTimeout)
	}
	cl.Close()
	return nil, fmt.Errorf("kafka: open: join group %s on %v: %w", cfg.Group, cfg.Brokers, err)
}

// Receive returns up to limit deliveries: nacked records whose delay has
// passed first, then new records, waiting up to Config.Wait when there
// are none. Before it hands records out it writes their delivery count
// into the group's commit metadata (see the package documentation); when
// that write fails, the records stay with the member for the next call.
func (t *Transport) Receive(ctx context.Context, limit int) ([]transport.Delivery, error) {
	limit = max(limit, 1)
	t.recvMu.Lock()
	defer t.recvMu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, transport.ErrClosed
	}
	due, next := t.dueLocked(time.Now())
	t.mu.Unlock()
	var pollErr error
	if due < limit {
		wait := t.cfg.Wait
		if due > 0 {
			wait = time.Millisecond // take only what is buffered
		} else if !next.IsZero() {
			wait = min(wait, max(time.Until(next), time.Millisecond))
		}
		pollErr = t.poll(ctx, wait, limit-due)
	}
	ds, commitFailed := t.handOut(ctx, limit)
	if pollErr == nil && len(ds) == 0 && commitFailed != nil {
		pollErr = commitFailed
	}
	if pollErr != nil && len(ds) > 0 {
		t.cfg.Logger.Warn("kafka: receive", "group", t.cfg.Group, "err", pollErr)
		pollErr = nil
	}
	return ds, pollErr
}

// poll fetches up to n records and registers them with their partitions.
func (t *Transport) poll(ctx context.Context, wait time.Duration, n int) error {
	pctx, cancel := context.WithTimeout(ctx, wait)
	fetches := t.cl.PollRecords(pctx, n)
	cancel()
	t.mu.Lock()
	fetches.EachRecord(func(r *kgo.Record) {
		p := t.parts[topicPartition{r.Topic, r.Partition}]
		if p == nil || !p.owned {
			return // revoked meanwhile: the next owner reads it
		}
		e := p.add(r)
		e.waiting = true
		t.ready = append(t.ready, e)
	})
	closed := t.closed
	t.mu.Unlock()
	t.cl.AllowRebalance()
	var errs []error
	for _, fe := range fetches.Errors() {
		switch {
		case errors.Is(fe.Err, kgo.ErrClientClosed) || closed:
			return transport.ErrClosed
		case errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled):
			if ctx.Err() != nil {
				return ctx.Err()
			}
		default:
			errs = append(errs, fmt.Errorf("kafka: fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err))
		}
	}
	return errors.Join(errs...)
}

// handOut takes up to limit ready records, counts their delivery, records
// the counts at the broker and returns the deliveries whose count was
// recorded; the others go back to the front of the queue.
func (t *Transport) handOut(ctx context.Context, limit int) ([]transport.Delivery, error) {
	t.mu.Lock()
	es := t.takeLocked(limit, time.Now())
	type undo struct {
		attempts int
		through  int64
	}
	undos := make([]undo, len(es))
	ds := make([]*delivery, len(es))
	for i, e := range es {
		o := e.rec.Offset
		undos[i] = undo{e.p.attempts[o], e.p.through}
		n := e.p.nextAttempt(o)
		e.p.attempts[o] = n
		e.p.through = max(e.p.through, o+1)
		e.seq++
		ds[i] = &delivery{t: t, e: e, attempt: n, seq: e.seq}
	}
	retry := len(es) > 0 || time.Since(t.lastFailed) >= time.Second
	t.mu.Unlock()
	if !retry {
		return nil, nil
	}
	failed := t.commitOwned(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(failed) == 0 {
		t.lastFailed = time.Time{}
	} else {
		t.lastFailed = time.Now()
	}
	out := make([]transport.Delivery, 0, len(ds))
	var back []*entry
	// Undo in reverse, so a partition's high-water mark returns to what
	// it was before this call.
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if failed[d.e.p] == nil {
			continue
		}
		d.e.p.attempts[d.e.rec.Offset] = undos[i].attempts
		d.e.p.through = undos[i].through
		d.e.seq--
		d.e.waiting = true
		back = append([]*entry{d.e}, back...)
		ds[i] = nil
	}
	for _, d := range ds {
		if d != nil && d.leasedLocked() {
			out = append(out, d)
		}
	}
	t.ready = append(back, t.ready...)
	if len(back) > 0 {
		return out, errors.Join(mapValues(failed)...)
	}
	return out, nil
}

// dueLocked counts the ready records due at now and says when the next
// one that is not becomes due (zero when none waits).
func (t *Transport) dueLocked(now time.Time) (int, time.Time) {
	n, next := 0, time.Time{}
	for _, e := range t.ready {
		switch {
		case !e.current():
		case !e.due.After(now):
			n++
		case next.IsZero() || e.due.Before(next):
			next = e.due
		}
	}
	return n, next
}

// takeLocked removes up to limit due records from the ready queue, in
// queue order, and drops the ones that no longer need delivering.
func (t *Transport) takeLocked(limit int, now time.Time) []*entry {
	var out []*entry
	keep := t.ready[:0]
	for _, e := range t.ready {
		switch {
		case !e.current():
			e.waiting = false
		case len(out) < limit && !e.due.After(now):
			e.waiting = false
			out = append(out, e)
		default:
			keep = append(keep, e)
		}
	}
	clear(t.ready[len(keep):])
	t.ready = keep
	return out
}

// Close leaves the group. It commits only what was acknowledged (the
// contiguous prefix); records in flight are not settled and go to the
// next owner of their partition. Deliveries of this member then report
// ErrLeaseLost, and Receive reports transport.ErrClosed.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.cl.Close() // leaves the group: onRevoked commits the acknowledged prefix
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.parts {
		if p.owned {
			p.revoke()
		}
	}
	t.ready = nil
	return nil
}
