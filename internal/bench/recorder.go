package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// sample is one applied message: when its transaction committed and how
// long after its receipt.
type sample struct {
	at  time.Time
	lat time.Duration
}

// recorder measures receive→commit per message: the transport wrapper
// notes when each message was received, Config.Observer notes its commit.
type recorder struct {
	mu      sync.Mutex
	recv    map[string]time.Time
	samples []sample
	// pub holds when the feed's publish of each message returned, and
	// e2e the publish→commit latencies: what an agent waiting on its
	// own event feels, the wait in the queue before its receive included.
	pub map[string]time.Time
	e2e []sample
	// begins are the consumer's store.Begin calls: on SQLite (BEGIN
	// IMMEDIATE) the wait for the write lock.
	begins []sample
	// applied counts applied decisions; other every other outcome, the
	// first of which is kept to say what it was.
	applied, other atomic.Int64
	firstOther     string
}

func newRecorder() *recorder {
	return &recorder{recv: map[string]time.Time{}, pub: map[string]time.Time{}}
}

// published notes that the messages ids were published at at.
func (r *recorder) published(ids []string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.pub[id] = at
	}
}

func (r *recorder) received(ds []transport.Delivery, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		r.recv[idOf(d.Body())] = at
	}
}

// observe is the consumer's Config.Observer.
func (r *recorder) observe(res seqboxtype.Result) {
	now := time.Now()
	if res.Outcome != seqboxtype.Applied {
		if r.other.Add(1) == 1 {
			r.mu.Lock()
			r.firstOther = fmt.Sprintf("%s %s/%s v%v: %s", res.Outcome, res.Source, res.ID, version(res.ObjectVersion), res.Reason)
			r.mu.Unlock()
		}
		return
	}
	r.mu.Lock()
	if at, ok := r.recv[res.ID]; ok {
		r.samples = append(r.samples, sample{at: now, lat: now.Sub(at)})
		delete(r.recv, res.ID)
	}
	if at, ok := r.pub[res.ID]; ok {
		// The publish's return is noted after its commit, so a message
		// can in principle commit first: that counts as no wait.
		r.e2e = append(r.e2e, sample{at: now, lat: max(0, now.Sub(at))})
		delete(r.pub, res.ID)
	}
	r.mu.Unlock()
	r.applied.Add(1)
}

// otherText says what the first outcome other than applied was.
func (r *recorder) otherText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstOther
}

// version prints an object version, "-" when there is none.
func version(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func (r *recorder) began(at time.Time, d time.Duration) {
	r.mu.Lock()
	r.begins = append(r.begins, sample{at: at, lat: d})
	r.mu.Unlock()
}

// window returns how many messages committed in [from, to) and their
// receive→commit latencies.
func (r *recorder) window(from, to time.Time) (int64, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lats := within(r.samples, from, to)
	return int64(len(lats)), lats
}

// e2eWindow returns the publish→commit latencies of the messages that
// committed in [from, to).
func (r *recorder) e2eWindow(from, to time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return within(r.e2e, from, to)
}

// beginWindow returns the durations of the Begin calls that started in
// [from, to).
func (r *recorder) beginWindow(from, to time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return within(r.begins, from, to)
}

func within(ss []sample, from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if !s.at.Before(from) && s.at.Before(to) {
			out = append(out, s.lat)
		}
	}
	return out
}

// beginTimed times the Begin calls of the store it wraps.
type beginTimed struct {
	store.Store
	rec *recorder
}

// Location passes the store's location through, so the consumer still
// acknowledges in the store's transaction when the queue shares it.
func (s beginTimed) Location() string {
	if l, ok := s.Store.(interface{ Location() string }); ok {
		return l.Location()
	}
	return ""
}

// OneWriter passes through whether the store has one writer at a time,
// which decides how the consumer shares out what is ready.
func (s beginTimed) OneWriter() bool {
	ow, ok := s.Store.(interface{ OneWriter() bool })
	return ok && ow.OneWriter()
}

func (s beginTimed) Begin(ctx context.Context) (store.ExecutorTx, error) {
	t0 := time.Now()
	tx, err := s.Store.Begin(ctx)
	s.rec.began(t0, time.Since(t0))
	return tx, err
}

// timed wraps a transport so the recorder sees each receipt. Deliveries
// pass through unchanged, so the transport's batch ack still accepts them.
type timed struct {
	transport.Transport
	rec *recorder
}

var (
	_ transport.BatchAcker    = timed{}
	_ transport.TxAcker       = timed{}
	_ transport.BatchExtender = timed{}
)

// Location and AckIn pass the queue's in-transaction acknowledgement
// through (the embedded queue always has it).
func (t timed) Location() string {
	if ta, ok := t.Transport.(transport.TxAcker); ok {
		return ta.Location()
	}
	return ""
}

func (t timed) AckIn(ctx context.Context, exec transport.Execer, ds []transport.Delivery) error {
	return t.Transport.(transport.TxAcker).AckIn(ctx, exec, ds)
}

func (t timed) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	ds, err := t.Transport.Receive(ctx, max)
	if len(ds) > 0 {
		t.rec.received(ds, time.Now())
	}
	return ds, err
}

func (t timed) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	return t.Transport.(transport.BatchAcker).AckBatch(ctx, ds)
}

func (t timed) ExtendBatch(ctx context.Context, ds []transport.Delivery, by time.Duration) error {
	return t.Transport.(transport.BatchExtender).ExtendBatch(ctx, ds, by)
}

// warnings is a slog handler that counts warnings and errors and keeps the
// first, so a bench run reports trouble without writing to stderr.
type warnings struct {
	mu    sync.Mutex
	n     int
	first string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.first == "" {
		w.first = r.Message
		r.Attrs(func(a slog.Attr) bool {
			w.first += " " + a.String()
			return true
		})
	}
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) summary() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.first
}
