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
// many times it ran, and its time in all. BEGIN and COMMIT count as
// statements. A query's time runs until its rows are ready, not over
// their reading.
type StatementTime struct {
	Query string
	Count int64
	Total time.Duration
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
// returned func, deferred, records it.
func timeStatement(query string) func() {
	r := recording.Load()
	if r == nil {
		return func() {}
	}
	start := time.Now()
	return func() { r.add(query, time.Since(start)) }
}

func (r *recorder) add(query string, d time.Duration) {
	q := strings.Join(strings.Fields(query), " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[q]
	if s == nil {
		s = &StatementTime{Query: q}
		r.by[q] = s
	}
	s.Count++
	s.Total += d
}
