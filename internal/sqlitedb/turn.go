package sqlitedb

import (
	"context"
	"sync"
)

// turns holds one writer turn per SQLite file this process writes.
var turns sync.Map // absolute path → chan struct{}

// Turn is this process's writer turn for the SQLite file path names (as
// FileOf resolves it; "" for an in-memory database, which gets a turn of
// its own). SQLite runs one write transaction at a time per file; writers
// in one process that take turns here start the moment the last one
// commits, instead of polling in SQLite's busy handler (whose sleeps grow
// to 100 ms). Other processes still meet busy_timeout.
func Turn(path string) chan struct{} {
	file := FileOf(path)
	if file == "" {
		return make(chan struct{}, 1)
	}
	return turnOf(file)
}

// turnOf is the writer turn of the file at the absolute path file.
func turnOf(file string) chan struct{} {
	v, _ := turns.LoadOrStore(file, make(chan struct{}, 1))
	return v.(chan struct{})
}

// Take waits for the turn; release gives it back (more than once is
// harmless).
func Take(ctx context.Context, turn chan struct{}) (release func(), err error) {
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-turn }) }, nil
}
