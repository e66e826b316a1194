// Package writeturn is one process's turn at a SQLite file's one writer,
// with producers first.
//
// SQLite runs one write transaction at a time per file. The writers of
// one process (the store's transactions, the embedded queue's receives,
// publishes and settles, a pool's lone writes) take turns here rather
// than polling in SQLite's busy handler, so the next one starts the
// moment the last one commits (docs/design.md §15.1).
//
// A turn is handed over in the order it was asked for, with one
// exception: a producer's write (the gateway's ingest, a publish to the
// embedded queue), marked with Urgent, goes before the consumers' waiting
// writes, though never twice in a row while one of theirs waits. A
// producer is a caller waiting for its commit (an HTTP client waiting for
// its 202), while a consumer's batch only grows by waiting: with plain
// order the gateway's ingest waited behind every worker's batch, the
// decider's grouped writes and the queue's receive each time, and its
// requests were answered in 7 ms where the writer held each of those for
// under 2 (docs/benchmarks-history.md §28).
package writeturn

import (
	"context"
	"runtime"
	"sync"
)

// Turn is the writer turn of one SQLite file in this process. The zero
// value is free and ready to use; a Turn must not be copied.
type Turn struct {
	mu sync.Mutex
	// taken counts the holdings so far.
	taken uint64
	held  bool
	// lastUrgent is set while the turn is held by an urgent taker, or
	// was last: the next hand-over prefers a waiting consumer.
	lastUrgent bool
	urgent     []*waiter
	normal     []*waiter
}

// waiter is one Take waiting; ready is sent the turn.
type waiter struct {
	ready  chan struct{}
	urgent bool
}

// urgentKey marks a context whose writes are a producer's.
type urgentKey struct{}

// Urgent returns ctx marked as a producer's: the turns taken with it go
// before the consumers' waiting ones (see the package comment).
func Urgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// IsUrgent reports whether ctx was marked with Urgent.
func IsUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// TryTake takes the turn if it is free and nobody waits for it; release
// gives it back (more than once is harmless).
func (t *Turn) TryTake() (release func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		return nil, false
	}
	t.held, t.lastUrgent = true, false
	t.taken++
	return t.releaser(), true
}

// Take waits for the turn, as a producer's when ctx is Urgent; release
// gives it back (more than once is harmless). It fails with ctx's error
// when ctx ends first, and then holds nothing.
func (t *Turn) Take(ctx context.Context) (release func(), err error) {
	urgent := IsUrgent(ctx)
	t.mu.Lock()
	if !t.held {
		t.held, t.lastUrgent = true, urgent
		t.taken++
		t.mu.Unlock()
		return t.releaser(), nil
	}
	w := &waiter{ready: make(chan struct{}, 1), urgent: urgent}
	if urgent {
		t.urgent = append(t.urgent, w)
	} else {
		t.normal = append(t.normal, w)
	}
	t.mu.Unlock()
	select {
	case <-w.ready:
		return t.releaser(), nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if t.remove(w) {
		t.mu.Unlock()
		return nil, ctx.Err()
	}
	t.mu.Unlock()
	// Handed over as ctx ended: pass it on.
	<-w.ready
	t.handOver()
	return nil, ctx.Err()
}

// Taken is how many times the turn was taken so far (each Take or
// TryTake that got it), for tests and diagnostics.
func (t *Turn) Taken() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.taken
}

// Held reports whether someone holds the turn now.
func (t *Turn) Held() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}

// Waiters is how many takers wait for the turn now.
func (t *Turn) Waiters() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.urgent) + len(t.normal)
}

// releaser is the release func of one holding of the turn. Handed to a
// waiter, the turn's new holder runs before the releaser goes on: the
// releaser yields its P (runtime.Gosched), where the woken holder waits
// next in line. Without it, with every P busy, the new holder waited for
// the releaser's work after its commit (its acks, its results, the next
// batch's start) while the one writer sat idle: 0.6 ms a hand-over on
// average in the agent path on two cores, 15% of a run. With it the
// gateway's instant agent went from 2,862 to 3,100 events/s and the
// core from 15,984 to 16,290 msgs/s (docs/benchmarks-history.md §44).
func (t *Turn) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			if t.handOver() {
				runtime.Gosched()
			}
		})
	}
}

// handOver gives the held turn to the next waiter, or frees it: an
// urgent waiter first, unless the turn's last holder was urgent too and a
// consumer waits. It reports whether a waiter got it.
func (t *Turn) handOver() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next *waiter
	switch {
	case len(t.urgent) > 0 && (!t.lastUrgent || len(t.normal) == 0):
		next, t.urgent = t.urgent[0], t.urgent[1:]
	case len(t.normal) > 0:
		next, t.normal = t.normal[0], t.normal[1:]
	default:
		t.held, t.lastUrgent = false, false
		return false
	}
	t.lastUrgent = next.urgent
	t.taken++
	next.ready <- struct{}{}
	return true
}

// remove takes w out of the queue it waits in; false when it was handed
// the turn already.
func (t *Turn) remove(w *waiter) bool {
	q := &t.normal
	if w.urgent {
		q = &t.urgent
	}
	for i, x := range *q {
		if x == w {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}
