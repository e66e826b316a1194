package sqlitedb

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StatementTime is what a recording (RecordStatements) saw of one
// statement: its text with runs of white space folded to one space, how
// many times it ran, how many times SQLite compiled it, and its time in
// all. BEGIN and COMMIT count as statements. A query's time runs until
// its rows are ready, not over their reading (nor over its compiling, for
// a prepared statement).
type StatementTime struct {
	Query string
	Count int64
	// Prepares counts its compilations: each prepare, and each run on a
	// connection without one (database/sql's Exec or Query on a
	// transaction or pool compiles the text every time).
	Prepares int64
	Total    time.Duration
}

// recorder sums the statements of one recording.
type recorder struct {
	mu sync.Mutex
	by map[string]*StatementTime
}

// recording is the recorder statements are summed in, or nil.
var recording atomic.Pointer[recorder]

// RecordStatements starts recording every statement run on this process's
// writer pools (Open, OpenAccess read-write, OpenRelaxed: the store's and
// the embedded queue's), with its time, for `seqbox bench agent
// --statements`: where the one writer's time goes. stop ends the
// recording and returns its statements, the longest in all first. One
// recording runs at a time; a second RecordStatements while one runs
// returns ok false. Off, a statement pays one atomic load and a
// deferred call that does nothing.
func RecordStatements() (stop func() []StatementTime, ok bool) {
	r := &recorder{by: map[string]*StatementTime{}}
	if !recording.CompareAndSwap(nil, r) {
		return nil, false
	}
	return func() []StatementTime {
		recording.CompareAndSwap(r, nil)
		r.mu.Lock()
		defer r.mu.Unlock()
		out := make([]StatementTime, 0, len(r.by))
		for _, s := range r.by {
			out = append(out, *s)
		}
		slices.SortFunc(out, func(a, b StatementTime) int {
			return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.Query, b.Query))
		})
		return out
	}, true
}

// timeStatement starts timing a run of query when a recording runs; the
// returned func, deferred, records it, compiled for this run when
// compiled.
func timeStatement(query string, compiled bool) func() {
	r := recording.Load()
	if r == nil {
		return func() {}
	}
	start := time.Now()
	return func() { r.add(query, 1, compiled, time.Since(start)) }
}

// countPrepare records a prepare of query when a recording runs.
func countPrepare(query string) {
	if r := recording.Load(); r != nil {
		r.add(query, 0, true, 0)
	}
}

func (r *recorder) add(query string, runs int64, compiled bool, d time.Duration) {
	q := strings.Join(strings.Fields(query), " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[q]
	if s == nil {
		s = &StatementTime{Query: q}
		r.by[q] = s
	}
	s.Count += runs
	if compiled {
		s.Prepares++
	}
	s.Total += d
}
