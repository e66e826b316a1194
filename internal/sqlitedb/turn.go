package sqlitedb

import (
	"sync"

	"github.com/seqbox/seqbox/internal/writeturn"
)

// turns holds one writer turn per SQLite file this process writes.
var turns sync.Map // absolute path → *writeturn.Turn

// Turn is this process's writer turn for the SQLite file path names (as
// FileOf resolves it; "" for an in-memory database, which gets a turn of
// its own). SQLite runs one write transaction at a time per file; writers
// in one process that take turns here start the moment the last one
// commits, instead of polling in SQLite's busy handler (whose sleeps grow
// to 100 ms), and a producer's goes first (writeturn). Other processes
// still meet busy_timeout.
func Turn(path string) *writeturn.Turn {
	file := FileOf(path)
	if file == "" {
		return new(writeturn.Turn)
	}
	return turnOf(file)
}

// turnOf is the writer turn of the file at the absolute path file.
func turnOf(file string) *writeturn.Turn {
	v, _ := turns.LoadOrStore(file, new(writeturn.Turn))
	return v.(*writeturn.Turn)
}
