package sqlstore

import "github.com/seqbox/seqbox/store"

// NoGroupWriter keeps st's group writer from ever starting, so that only
// store transactions carry the pool's queued writes (tests).
func NoGroupWriter(st store.Store) {
	g := st.(*Store).group
	g.once.Do(func() { close(g.done) }) // as a writer never started
}

// QueuedWrites is how many of st's pool writes wait for a transaction.
func QueuedWrites(st store.Store) int {
	g := st.(*Store).group
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.q)
}

// LatestSchemaVersion is the version the last migration brings a database to.
var LatestSchemaVersion = migrations[len(migrations)-1].Version
