package sqlstore

import (
	"context"

	"github.com/seqbox/seqbox/store"
)

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

// HoldPoolSends keeps st's pool statements from being sent (pipeGroup)
// until release is called; waiting counts the statements queued or held
// meanwhile. On a store that sends each statement alone, both do nothing
// (waiting: -1).
func HoldPoolSends(st store.Store) (waiting func() int, release func()) {
	g := st.(*Store).pipes
	if g == nil {
		return func() int { return -1 }, func() {}
	}
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	return func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.q) + g.held
	}, func() { close(hold) }
}

// PoolSends is how many sends st's pipeGroup made.
func PoolSends(st store.Store) int {
	g := st.(*Store).pipes
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent
}

// PoolStatement runs st on st's pool as the agent path's single
// statements run (Executor.single).
func PoolStatement(ctx context.Context, s store.Store, st store.Statement) (int64, error) {
	return s.(*Store).executor(nil).single(ctx, st)
}

// KeyProbes are PostgreSQL's set-based statements that look rows up by
// key in a table whose one index is its key (arrays.go), named, for
// consumer, keys and ids: the statements whose plans must probe the key
// once per element whatever the tables' statistics say.
func KeyProbes(consumer string, keys []string, ids []store.Identity) map[string]store.Statement {
	lock, _ := keyLockArrays(consumer, keys, " FOR UPDATE", map[string]store.KeyState{})
	moves := make([]store.KeyMove, len(keys))
	for i, k := range keys {
		moves[i] = store.KeyMove{Key: k, Next: 1}
	}
	return map[string]store.Statement{
		"keys locked":    lock,
		"keys advanced":  keyAdvanceStatement(store.KeyAdvanceManyParams{Consumer: consumer, Moves: moves}),
		"decisions read": readManyArrays(store.IdentitiesRef{Consumer: consumer, IDs: ids}, decisionsRead(nil)),
	}
}

// InboxListQuery is InboxList's statement and arguments for p.
func InboxListQuery(p store.InboxListParams) (string, []any) { return inboxListQuery(p) }

// KeyViewListQuery is KeyViewList's statement and arguments for p.
func KeyViewListQuery(p store.KeyViewListParams) (string, []any) {
	return keyViewListQuery(p.Consumer, "", p.Stuck)
}

// ParkedCollisionListQuery is ParkedCollisionList's statement (arrays:
// PostgreSQL's).
func ParkedCollisionListQuery(arrays bool, p store.ParkedCollisionListParams) (string, []any) {
	return parkedCollisionListQuery(arrays, p)
}
