package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// Config configures a Relay. Zero values take the defaults.
type Config struct {
	// Name is the relay's lease: relays with one name take turns, one
	// active at a time. Default "default".
	Name string
	// Batch is how many events one round reads. Default 256.
	Batch int
	// Parallel is how many partition keys publish at once. Default 8.
	Parallel int
	// Interval is how long an idle relay waits before it looks again.
	// Default 100ms.
	Interval time.Duration
	// Lease is how long the active relay holds its lease without renewing
	// it; a standby takes over after that. Default 15s.
	Lease time.Duration
	// Backoff is how long an event the publisher refused waits before it
	// is tried again; the wait doubles at each further refusal, up to
	// MaxBackoff. Its key's later events wait behind it, the other keys do
	// not. Default 1s.
	Backoff time.Duration
	// MaxBackoff caps the wait of an event refused again and again.
	// Default 1m (or Backoff, when that is longer).
	MaxBackoff time.Duration
	// Keep is how long a published event stays in the outbox: the active
	// relay removes older ones, at most once a minute (Prune). Default 7
	// days; negative keeps them for good.
	Keep time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives publish failures: each refused event with its id,
	// key, attempts and next attempt. Default slog.Default().
	Logger *slog.Logger
}

// Relay publishes the outbox.
type Relay struct {
	ex    store.Outbox
	pub   transport.Publisher
	cfg   Config
	owner string
	hook  fault.Hook

	published atomic.Uint64
	refused   atomic.Uint64
	pruned    atomic.Uint64
	// prunedAt is when this relay last pruned (Prune), in the relay's
	// clock's Unix nanoseconds.
	prunedAt atomic.Int64
}

// Stats counts what a relay did since it was made.
type Stats struct {
	// Published counts the events it published and marked published.
	Published uint64
	// Refused counts the publish attempts the publisher refused.
	Refused uint64
	// Pruned counts the published events it removed (Prune).
	Pruned uint64
}

// errRefused marks a round in which the publisher refused some events:
// they are recorded and logged one by one, and their keys back off.
var errRefused = errors.New("outbox: publish refused")

// NewRelay returns a relay that publishes st's outbox to pub.
func NewRelay(st store.Store, pub transport.Publisher, cfg Config) (*Relay, error) {
	if st == nil || pub == nil {
		return nil, errors.New("outbox: a store and a publisher are required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", cfg.Interval}, {"Lease", cfg.Lease}, {"Backoff", cfg.Backoff}, {"MaxBackoff", cfg.MaxBackoff}} {
		if d.v < 0 {
			return nil, fmt.Errorf("outbox: %s %s is negative", d.name, d.v)
		}
	}
	if cfg.Batch < 0 || cfg.Parallel < 0 {
		return nil, fmt.Errorf("outbox: Batch %d and Parallel %d must not be negative", cfg.Batch, cfg.Parallel)
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.Batch == 0 {
		cfg.Batch = 256
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 8
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Lease == 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(time.Minute, cfg.Backoff)
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.MaxBackoff < cfg.Backoff {
		return nil, fmt.Errorf("outbox: MaxBackoff %s is shorter than Backoff %s", cfg.MaxBackoff, cfg.Backoff)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	// The chaos harness and the crash tests pass a store carrying a crash
	// hook (internal/own); nothing else reaches a Relay.
	st, opt := own.Unwrap(st)
	return &Relay{ex: st.Executor(), pub: pub, cfg: cfg, owner: hex.EncodeToString(b[:]), hook: opt.Hook}, nil
}

// Run publishes until ctx ends, taking the lease when it is free and
// keeping it while active. It returns nil when ctx ends, having marked
// what its last round published and given its lease up (a standby, or
// the next process, takes over at once), and the store's error when the
// store was closed.
func (r *Relay) Run(ctx context.Context) error {
	defer func() {
		// Given up even though ctx ended: a relay that stops cleanly
		// does not make the next one wait the lease out.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = r.Release(rctx)
	}()
	for ctx.Err() == nil {
		n, err := r.RunOnce(ctx)
		refused := errors.Is(err, errRefused) // logged event by event
		if err != nil && !refused && ctx.Err() == nil {
			if fault.IsCrash(err) {
				return err
			}
			if sqlstore.IsClosed(err) {
				return fmt.Errorf("outbox: relay %s: its store is closed: %w", r.cfg.Name, err)
			}
			r.cfg.Logger.Warn("outbox: relay round failed", "relay", r.cfg.Name, "err", err)
		}
		if n > 0 && (err == nil || refused) {
			continue // more may be waiting; the refused keys back off
		}
		t := time.NewTimer(r.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// RunOnce runs one round when this relay holds (or takes) the lease: it
// reads up to Batch unpublished events, oldest first, of the keys whose
// oldest unpublished event is not backing off, publishes them key by key,
// and marks what was published. An event the publisher refuses gets an
// attempt, its error and a time to be tried again (Backoff, doubling to
// MaxBackoff); until then its key's later events wait, while the rounds
// read the other keys past them. RunOnce returns how many events it
// published, and an error naming the refused ones; zero with a nil error
// when another relay holds the lease or nothing is ready.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	leader, err := r.lease(ctx)
	if err != nil || !leader {
		return 0, err
	}
	r.pruneIfDue(ctx)
	// A round never outlasts the lease it began under, so that no standby
	// takes over while this relay publishes (two relays publishing at
	// once send a key's events twice and out of order), and one publish
	// that never returns holds up its own key only.
	rctx, cancel := context.WithTimeout(ctx, r.roundBound())
	defer cancel()
	events, err := r.unpublished(rctx)
	if err != nil || len(events) == 0 {
		return 0, err
	}
	done, failed := r.publish(rctx, events)
	if err := r.hook.At(fault.RelayAfterPublish); err != nil {
		return 0, err
	}
	// What was published is marked even when ctx ended meanwhile (a
	// process told to stop): left unmarked, all of it would be published
	// again.
	if err := r.mark(context.WithoutCancel(ctx), done, failed); err != nil {
		return 0, err
	}
	if err := r.hook.At(fault.RelayAfterMark); err != nil {
		return 0, err
	}
	r.published.Add(uint64(len(done)))
	if len(failed) > 0 {
		var errs []error
		for _, f := range firstFailures(failed, 3) {
			errs = append(errs, f.err)
		}
		return len(done), fmt.Errorf("%w: %d of %d events not published this round (their keys back off): %w",
			errRefused, len(failed), len(events), errors.Join(errs...))
	}
	return len(done), nil
}

// Stats returns what the relay did since it was made.
func (r *Relay) Stats() Stats {
	return Stats{Published: r.published.Load(), Refused: r.refused.Load(), Pruned: r.pruned.Load()}
}

// event is one unpublished outbox row.
type event struct {
	seq      int64
	key      string
	id       string
	body     []byte
	attempts int
}

// failure is an event the publisher refused in a round.
type failure struct {
	event
	err error
}

// unpublished reads the round's events: the oldest unpublished ones,
// leaving out every event at or behind a refused event of its key that
// still backs off. A key is thus read from its oldest unpublished event
// or not at all, and a refused head holds up its own key only.
func (r *Relay) unpublished(ctx context.Context) ([]event, error) {
	rows, err := r.ex.OutboxListReady(ctx, store.OutboxListReadyParams{Now: r.cfg.Now(), Limit: r.cfg.Batch})
	if err != nil {
		return nil, fmt.Errorf("outbox: read: %w", err)
	}
	var out []event
	for _, e := range rows {
		out = append(out, event{seq: e.Seq, key: e.PartitionKey, id: e.EventID, body: e.Body, attempts: e.Attempts})
	}
	return out, nil
}

// roundBound is how long a round may publish: two thirds of the lease,
// the rest left for its reads and marks and for clocks that differ.
func (r *Relay) roundBound() time.Duration { return r.cfg.Lease * 2 / 3 }

// stuckGrace is how long a round that reached its bound waits for the
// publishes in flight to return (a publisher that honours its context
// returns at once).
const stuckGrace = 50 * time.Millisecond

// publish publishes the events, each key's in order and up to Parallel
// keys at once, until ctx (the round) ends. A key stops at its first
// failure, so its later events are not published ahead of it. A publish
// cut short by the round's end is no refusal (its event waits for the
// next round); one that has not returned by then is its key's refusal,
// and the round does not wait for it.
func (r *Relay) publish(ctx context.Context, events []event) (done []int64, failed []failure) {
	var keys []string
	byKey := map[string][]event{}
	for _, e := range events {
		if _, ok := byKey[e.key]; !ok {
			keys = append(keys, e.key)
		}
		byKey[e.key] = append(byKey[e.key], e)
	}
	var mu sync.Mutex
	over := false              // the round ended: late results are not counted
	busy := map[string]event{} // the event each key is publishing now
	sem := make(chan struct{}, r.cfg.Parallel)
	var wg sync.WaitGroup
launch:
	for _, k := range keys {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break launch
		}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, e := range byKey[k] {
				mu.Lock()
				if over || ctx.Err() != nil {
					mu.Unlock()
					return // the round is over: the rest wait for the next
				}
				busy[k] = e
				mu.Unlock()
				err := r.safePublish(ctx, e.body)
				mu.Lock()
				delete(busy, k)
				cut := err != nil && ctx.Err() != nil
				switch {
				case over:
				case cut:
				case err != nil:
					failed = append(failed, failure{e, fmt.Errorf("event %s (key %s): %w", e.id, e.key, err)})
				default:
					done = append(done, e.seq)
				}
				stop := over || err != nil
				mu.Unlock()
				if stop {
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		t := time.NewTimer(stuckGrace)
		select {
		case <-finished:
		case <-t.C:
		}
		t.Stop()
	}
	mu.Lock()
	defer mu.Unlock()
	over = true
	for _, e := range busy {
		failed = append(failed, failure{e, fmt.Errorf("event %s (key %s): the publish did not return within the round (%s, two thirds of the lease): "+
			"a publisher must return when its context ends", e.id, e.key, r.roundBound())})
	}
	return slices.Clone(done), slices.Clone(failed)
}

// safePublish is the publisher's Publish with a panic recovered as its
// error: a publisher that panics refuses that event (its key waits and
// backs off as for any refusal) instead of ending the process from a
// goroutine of the relay's that nobody could recover.
func (r *Relay) safePublish(ctx context.Context, body []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the publisher panicked: panic: %v", p)
		}
	}()
	return r.pub.Publish(ctx, body)
}

// mark records the round: published rows get their time, refused ones an
// attempt, the error and the time they are tried again, and are logged.
func (r *Relay) mark(ctx context.Context, done []int64, failed []failure) error {
	at := r.cfg.Now()
	if len(done) > 0 {
		if err := r.ex.OutboxMarkPublished(ctx, store.OutboxMarkPublishedParams{Seqs: done, At: at}); err != nil {
			return fmt.Errorf("outbox: mark published: %w", err)
		}
	}
	for _, f := range failed {
		attempts := f.attempts + 1
		wait := r.backoff(attempts)
		if err := r.ex.OutboxRefusalRecord(ctx, store.OutboxRefusalRecordParams{Seq: f.seq, Error: f.err.Error(),
			NextAttempt: at.Add(wait)}); err != nil {
			return fmt.Errorf("outbox: record failure: %w", err)
		}
		r.refused.Add(1)
		r.cfg.Logger.Warn("outbox: publish refused; the event's key waits for it",
			"relay", r.cfg.Name, "event", f.id, "key", f.key, "seq", f.seq,
			"attempts", attempts, "retry_in", wait, "err", errors.Unwrap(f.err))
	}
	return nil
}

// backoff is how long an event refused attempts times waits: Backoff,
// doubled at each further refusal, at most MaxBackoff.
func (r *Relay) backoff(attempts int) time.Duration {
	d := r.cfg.Backoff
	for i := 1; i < attempts && d < r.cfg.MaxBackoff; i++ {
		if d > r.cfg.MaxBackoff/2 {
			return r.cfg.MaxBackoff
		}
		d *= 2
	}
	return min(d, r.cfg.MaxBackoff)
}

// lease takes or renews the relay's lease; false when another relay
// holds it.
func (r *Relay) lease(ctx context.Context) (bool, error) {
	now := r.cfg.Now()
	ok, err := r.ex.OutboxLeaseTake(ctx, store.OutboxLeaseParams{Name: r.cfg.Name, Owner: r.owner, Now: now, Until: now.Add(r.cfg.Lease)})
	if err != nil {
		return false, fmt.Errorf("outbox: lease %s: %w", r.cfg.Name, err)
	}
	return ok, nil
}

// DefaultKeep is how long a published event stays in the outbox by
// default (Config.Keep).
const DefaultKeep = 7 * 24 * time.Hour

// pruneEvery is how often the active relay prunes.
const pruneEvery = time.Minute

// pruneBatch and pruneBatches bound one prune: batches of pruneBatch
// events, each its own statement, at most pruneBatches of them; what is
// left goes at the next.
const (
	pruneBatch   = 1000
	pruneBatches = 20
)

// pruneIfDue prunes when the last prune is pruneEvery old (a round of the
// active relay calls it); a failure is logged, and the round goes on.
func (r *Relay) pruneIfDue(ctx context.Context) {
	if r.cfg.Keep < 0 || r.cfg.Now().UnixNano()-r.prunedAt.Load() < int64(pruneEvery) {
		return
	}
	if _, err := r.Prune(ctx); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("outbox: prune failed; the published events stay until the next", "relay", r.cfg.Name, "err", err)
	}
}

// Prune removes the events published more than Config.Keep ago, a batch
// at a time, and reports how many it removed; unpublished events stay.
// The active relay calls it once a minute; a program that runs the relay
// by RunOnce alone gets the same. With a negative Keep it removes none.
func (r *Relay) Prune(ctx context.Context) (int64, error) {
	r.prunedAt.Store(r.cfg.Now().UnixNano())
	if r.cfg.Keep < 0 {
		return 0, nil
	}
	before := r.cfg.Now().Add(-r.cfg.Keep)
	var total int64
	for range pruneBatches {
		n, err := r.ex.OutboxPrune(ctx, store.OutboxPruneParams{Before: before, Limit: pruneBatch})
		total += n
		r.pruned.Add(uint64(n))
		if err != nil {
			return total, fmt.Errorf("outbox: prune: %w", err)
		}
		if n < pruneBatch {
			break
		}
	}
	return total, nil
}

// Release gives the lease up, so a standby relay takes over at once.
func (r *Relay) Release(ctx context.Context) error {
	return r.ex.OutboxLeaseRelease(ctx, store.OutboxLeaseParams{Name: r.cfg.Name, Owner: r.owner})
}

// firstFailures returns the n oldest of failed.
func firstFailures(failed []failure, n int) []failure {
	out := slices.Clone(failed)
	slices.SortFunc(out, func(a, b failure) int { return cmp.Compare(a.seq, b.seq) })
	return out[:min(n, len(out))]
}

// Pending counts the events not yet published, and the age of the oldest.
func (r *Relay) Pending(ctx context.Context) (int, time.Duration, error) {
	b, age, err := r.backlog(ctx)
	return b.Pending, age, err
}

// backlog reads what the outbox holds unpublished, and the age of its
// oldest event.
func (r *Relay) backlog(ctx context.Context) (store.OutboxBacklog, time.Duration, error) {
	b, err := r.ex.OutboxBacklog(ctx)
	if err != nil || b.Pending == 0 {
		return b, 0, err
	}
	return b, r.cfg.Now().Sub(b.Oldest), nil
}

// Refusal is a partition key held up by an event the publisher refused:
// the key's oldest unpublished event, and when it is tried again.
type Refusal struct {
	// Key is the partition key; its later events wait.
	Key string
	// EventID is the refused event's id.
	EventID string
	// Seq is its place in the outbox: a key's events publish in Seq order.
	Seq int64
	// Attempts counts the publisher's refusals of it so far.
	Attempts int
	// LastError is the latest refusal's error.
	LastError string
	// Unpublished counts the key's events not yet published, this one included.
	Unpublished int
	// Since is when the event was emitted; NextAttempt when it is tried
	// again.
	Since, NextAttempt time.Time
}

// Refusals lists the keys whose oldest unpublished event the publisher
// refused, oldest first: the events that hold up their keys.
func (r *Relay) Refusals(ctx context.Context) ([]Refusal, error) {
	rows, err := r.ex.OutboxRefusalList(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: refusals: %w", err)
	}
	var out []Refusal
	for _, f := range rows {
		out = append(out, Refusal{Key: f.PartitionKey, EventID: f.EventID, Seq: f.Seq, Attempts: f.Attempts,
			LastError: f.LastError, Unpublished: f.Unpublished, Since: f.Since.Local(), NextAttempt: f.NextAttempt.Local()})
	}
	return out, nil
}
