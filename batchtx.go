package seqbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// errRerun ends an optimistic run of a batch: a delivery needs to undo
// part of the transaction (its handler failed, or it lost a key race),
// which only a run with savepoints can do. The batch rolls back and runs
// again with them.
var errRerun = errors.New("seqbox: the batch runs again with savepoints")

// noOutcome is what the inbox's outcome column holds for an identity
// recorded before its delivery reached an outcome: it stopped to be
// decided by the agent, or a crash or shutdown came between the two. It is
// not an outcome (the set is closed); the identity is not final.
const noOutcome seqboxtype.Outcome = ""

// batchTx is one store transaction as the pipeline sees it.
//
// A batch runs optimistically first: no savepoints, the identities
// inserted and the keys read and locked up front in a few multi-row
// statements (prefetch), and the writes every delivery makes to its inbox
// row, its key's version and its retry count deferred to one multi-row
// statement each at the end. Reads keep seeing the batch's own writes:
// the key states are served from memory, kept up to date by the writes
// that go through here, and any read of what a deferred write touches
// flushes the deferred writes first. A delivery that would need a
// savepoint (RollbackTo) fails the run with errRerun instead.
//
// Outside an optimistic run (operator actions, the sweeper, DeliverTx,
// and the rerun of a batch), every call goes straight to the store and
// each delivery has its savepoint.
type batchTx struct {
	// tx is the store transaction. The pipeline reaches it only through
	// the methods below, each of which says whether it defers, flushes
	// or passes straight through: a driver method not listed here cannot
	// be called on a batch by mistake.
	tx       store.ExecutorTx
	n        int
	consumer string
	// optimistic is set for the first run of a batch.
	optimistic bool
	// keys holds key states read under their locks in this transaction,
	// with the batch's own deferred version moves applied.
	keys map[string]store.KeyState
	// inserted holds the identities the prefetch inserted (true) or found
	// already recorded (false); each answers one InsertInbox.
	inserted map[store.Identity]bool
	// provisional holds the identities the prefetch inserted as applied
	// whose delivery has not recorded its outcome yet. Recording applied
	// then costs no write; one still provisional at the end of the run is
	// written as pending, as one by one it would be.
	provisional map[store.Identity]bool
	// existing holds inbox rows as they stand in the transaction, known
	// without a read: those the prefetch read with one statement for the
	// identities recorded before the batch (its re-sends), and those it
	// inserted itself (for a second copy within the batch). A row leaves
	// when the batch writes its outcome or deletes it.
	existing map[store.Identity]store.InboxRow
	// aheadDecisions and aheadBound hold, in an optimistic run of a
	// consumer with Decide, what the prefetch read in one statement each
	// for the identities it inserted (each sent once in the batch): the
	// decision recorded (found false when none) and the payload hash the
	// turn is bound to ("" when none). A decision answers its identity's
	// first DecisionGet and is dropped then (later looks read the store);
	// a turn's hash is kept up to date by the batch's own writes to the
	// turn (TurnTake, RetryClear; RetryRecord drops it), under the key
	// locks the prefetch took first.
	aheadDecisions map[store.Identity]aheadDecision
	aheadBound     map[store.Identity]string
	// retryIDs are, for each key the prefetch found with retry rows, the
	// identities of those rows, read under the key locks; retryAdded are
	// the keys this run has written a retry row on since (RetryRecord,
	// TurnTake), and cleared the identities whose rows it deleted
	// (RetryClear). Together they answer noOtherRetrying.
	retryIDs   map[string][]store.Identity
	retryAdded map[string]bool
	cleared    map[store.Identity]bool
	// turns and claims are the turns and decision claims an optimistic
	// run of a consumer with Decide takes for the messages it stops,
	// written in one statement each: the turns by the next flush (any
	// read of the turns flushes first), the claims last (finish), and a
	// claim another owner holds is then taken off its message (claimsTaken).
	turns  []store.TurnRow
	turnAt time.Time
	claims []store.DecisionClaimParams
	// lookAfterClaims: after the run's claims, in the same transaction,
	// it reads the claimed identities' decisions, so that their deciders
	// need not look again before they ask (preClaim.looked,
	// docs/design.md §10.1). Set where transactions run side by side
	// (PostgreSQL): the run's earlier reads are not one snapshot there.
	// decidedAfter holds what the queued read found (finishQueued).
	lookAfterClaims bool
	decidedAfter    map[store.Identity]store.Decision
	// Deferred writes.
	outcomes    map[store.Identity]int // index into outcomeRows
	outcomeRows []store.OutcomeRow
	moves       map[string]int // index into moveRows
	moveRows    []store.KeyMove
	clears      []store.Identity
	// uninserted are the rows the prefetch inserted for messages that
	// stopped before their handler (uninsert), deleted by the next flush:
	// any read of the inbox or of a key's turn flushes first.
	uninserted []store.Identity
	// movedAt is when the last deferred move was made.
	movedAt time.Time
	// failed holds the handler errors of the batch's optimistic run,
	// shared with its rerun: a handler that failed is not asked again in
	// the same delivery (it might answer differently); its failure is
	// recorded as it was. Handlers that succeeded run again, their writes
	// having rolled back with the optimistic run.
	failed map[store.Identity]error
	// defers: the optimistic run hands the events it applies to one
	// BatchHandler call before the commit (applyDeferred), collected in
	// deferred.
	defers   bool
	deferred []seqboxtype.Event
	// queue is the Handler's Tx in an optimistic run on a store that
	// pipelines: its writes are sent together (queuedTx). Nil in any
	// other run.
	queue *queuedTx
	// advance is where in the queue the run's key moves went (finish),
	// and how many they were; nil when they did not go there. turnsQueued
	// and claimsQueued are the turns and claims that went there
	// (finishQueued).
	advance      *queuedMoves
	turnsQueued  *queuedTurns
	claimsQueued []queuedClaims
	// undecided collects the messages the run stopped before their
	// handler to be decided (awaitDecision); origin is the index of the
	// input being run, which each one is reported under.
	undecided []undecided
	origin    int
	// spans are the process spans of the messages this transaction ran,
	// ended by endSpans once it commits or rolls back.
	spans []openSpan
	// businessKeys holds the business keys this transaction locked
	// (lockBusinessKey).
	businessKeys map[string]bool
}

// deciding reports whether this run stopped (source, id) to be decided.
func (b *batchTx) deciding(source, id string) bool {
	for _, u := range b.undecided {
		if !u.after && u.ev.Source == source && u.ev.ID == id {
			return true
		}
	}
	return false
}

// handle runs the handler of ev, or answers with the failure it had in
// the batch's optimistic run.
func (b *batchTx) handle(ctx context.Context, ev seqboxtype.Event, run func(context.Context, *batchTx, seqboxtype.Event) error) error {
	id := store.Identity{Source: ev.Source, ID: ev.ID}
	if err, ok := b.failed[id]; ok && !b.optimistic {
		delete(b.failed, id)
		return err
	}
	if b.defers && b.optimistic {
		b.deferred = append(b.deferred, ev)
		return nil
	}
	err := run(ctx, b, ev)
	if errors.Is(err, errRerun) {
		return err // nobody's failure (runHandler)
	}
	if b.queue != nil && b.queue.err != nil {
		// A queued statement failed, maybe another handler's: the
		// transaction is dead, and this is nobody's failure yet. The
		// rerun runs each handler's statements one by one.
		return errRerun
	}
	if err != nil && b.failed != nil && b.optimistic {
		b.failed[id] = err
	}
	return err
}

func (b *batchTx) savepoint() string {
	b.n++
	return "d" + strconv.Itoa(b.n)
}

// Savepoint opens a savepoint, except in an optimistic run.
func (b *batchTx) Savepoint(ctx context.Context, name string) error {
	if b.optimistic {
		return nil
	}
	return b.tx.Savepoint(ctx, name)
}

// SavepointRelease closes a savepoint, except in an optimistic run.
func (b *batchTx) SavepointRelease(ctx context.Context, name string) error {
	if b.optimistic {
		return nil
	}
	return b.tx.SavepointRelease(ctx, name)
}

// SavepointRollback undoes a delivery; an optimistic run cannot, and
// reruns.
func (b *batchTx) SavepointRollback(ctx context.Context, name string) error {
	if b.optimistic {
		return errRerun
	}
	return b.tx.SavepointRollback(ctx, name)
}

// queuedMoves are the key moves of a run in its queue: the statement's
// position, and the moves it must win.
type queuedMoves struct{ at, want int }

// rerun is the error that ends an optimistic run whose queue failed to
// send (queuedTx): the run with savepoints, or ctx's error when the
// batch is being abandoned.
func (b *batchTx) rerun(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errRerun
}

// sendQueue sends what is queued (queuedTx), last before the commit: the
// handlers' and the audit's writes, and the acknowledgement in the
// transaction (execer) if its answer has not sent them already.
func (b *batchTx) sendQueue(ctx context.Context) error {
	if b.queue == nil {
		return nil
	}
	if b.queue.send() != nil {
		return b.rerun(ctx)
	}
	if a := b.advance; a != nil && b.queue.affected[a.at] != int64(a.want) {
		// A key moved by another transaction: cannot happen under the
		// key locks; a run with savepoints settles it delivery by
		// delivery.
		return b.rerun(ctx)
	}
	if q := b.turnsQueued; q != nil {
		b.turnsQueued = nil
		for _, id := range q.want {
			if !q.taken[id] {
				// Bound to another copy meanwhile, as flushTurns finds it.
				return b.rerun(ctx)
			}
		}
	}
	for _, c := range b.claimsQueued {
		b.claimsTaken(c.owner, c.claimed)
	}
	b.claimsQueued = nil
	if b.decidedAfter != nil {
		b.lookedAfterClaims(b.decidedAfter)
		b.decidedAfter = nil
	}
	return nil
}

// ownTx is the transaction seqbox's own writes in a handler go to
// (own.WithTx): with a queue, the writes that are never read back in the
// batch join it (queuedOwnTx).
func (b *batchTx) ownTx() store.ExecutorTx {
	if b.queue != nil {
		return queuedOwnTx{ExecutorTx: b.tx, q: b.queue}
	}
	return b.tx
}

// execer runs the acknowledgement in the transaction: through the queue
// when there is one, so that it goes with the handlers' writes.
func (b *batchTx) execer() transport.Execer {
	if b.queue != nil {
		return b.queue
	}
	if e, ok := b.tx.(transport.Execer); ok {
		return e // the store's own statement cache (sqlstore.Executor.ExecContext)
	}
	return b.tx.SQL()
}

// finish ends an optimistic run before its commit: the identities still
// provisional are pending, and the deferred writes are written.
func (b *batchTx) finish(ctx context.Context) error {
	for id := range b.provisional {
		if err := b.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: b.consumer, Source: id.Source, ID: id.ID, Outcome: noOutcome}); err != nil {
			return err
		}
	}
	if b.queue != nil {
		return b.finishQueued(ctx)
	}
	if err := b.flushTurns(ctx); err != nil {
		return err
	}
	if err := b.takeClaims(ctx); err != nil {
		return err
	}
	return b.flush(ctx)
}

// finishQueued is finish with a queue: the writes of the messages the
// run stopped to be decided (their inbox rows taken back, their turns,
// their claims), the key moves and the retry clears join it, in the order
// finish writes them one round trip each, so that they go with the
// handlers' writes and the acknowledgement in the round trip before the
// commit. sendQueue checks that each turn was taken and each move won,
// and takes the claims other owners hold off their messages. The
// deferred outcomes are written now, as flush writes them.
func (b *batchTx) finishQueued(ctx context.Context) error {
	pl := b.queue.pl
	var stmts []store.Statement
	if len(b.uninserted) > 0 {
		stmts = append(stmts, pl.InboxDeleteStatement(store.IdentitiesRef{Consumer: b.consumer, IDs: b.uninserted}))
		b.uninserted = b.uninserted[:0]
	}
	if len(b.turns) > 0 {
		q := &queuedTurns{taken: make(map[store.Identity]bool, len(b.turns))}
		for _, t := range b.turns {
			q.want = append(q.want, store.Identity{Source: t.Source, ID: t.ID})
		}
		stmts = append(stmts, pl.TurnTakeStatement(store.TurnTakeManyParams{Consumer: b.consumer, At: b.turnAt, Turns: b.turns}, q.taken))
		b.turnsQueued, b.turns = q, b.turns[:0]
	}
	var claimed []store.Identity
	for len(b.claims) > 0 {
		p := b.claimsOfFirstOwner()
		c := queuedClaims{owner: p.Owner, claimed: make(map[store.Identity]bool, len(p.IDs))}
		stmts = append(stmts, pl.DecisionClaimStatement(p, c.claimed))
		b.claimsQueued = append(b.claimsQueued, c)
		claimed = append(claimed, p.IDs...)
	}
	if b.lookAfterClaims && len(claimed) > 0 {
		// After the claims: a statement of its own, so it reads what
		// committed while they waited for a row lock.
		b.decidedAfter = make(map[store.Identity]store.Decision, len(claimed))
		stmts = append(stmts, pl.DecisionsStatement(store.IdentitiesRef{Consumer: b.consumer, IDs: claimed}, b.decidedAfter))
	}
	for _, st := range stmts {
		if _, err := b.queue.add(st); err != nil {
			return b.rerun(ctx)
		}
	}
	if len(b.moveRows) > 0 {
		n, err := b.queue.add(pl.KeyAdvanceStatement(store.KeyAdvanceManyParams{Consumer: b.consumer, Moves: b.moveRows, At: b.movedAt}))
		if err != nil {
			return b.rerun(ctx)
		}
		b.advance = &queuedMoves{at: n, want: len(b.moveRows)}
		b.moveRows, b.moves = b.moveRows[:0], nil
	}
	if len(b.clears) > 0 {
		if _, err := b.queue.add(pl.RetryClearStatement(store.RetryClearManyParams{Consumer: b.consumer, IDs: b.clears})); err != nil {
			return b.rerun(ctx)
		}
		b.clears = b.clears[:0]
	}
	return b.flush(ctx)
}

// queuedTurns are the turns a run put in its queue (finishQueued): the
// identities it must take, and those it took once sent.
type queuedTurns struct {
	want  []store.Identity
	taken map[store.Identity]bool
}

// queuedClaims are one owner's claims a run put in its queue, and the
// identities it claimed once sent.
type queuedClaims struct {
	owner   string
	claimed map[store.Identity]bool
}

// flush writes the deferred writes.
func (b *batchTx) flush(ctx context.Context) error {
	if err := b.flushTurns(ctx); err != nil {
		return err
	}
	return b.flushMoves(ctx)
}

// flushTurns writes what the messages a run stopped to be decided
// deferred: their inbox rows taken back, and their turns.
func (b *batchTx) flushTurns(ctx context.Context) error {
	if len(b.uninserted) > 0 {
		if err := b.tx.InboxDeleteMany(ctx, store.IdentitiesRef{Consumer: b.consumer, IDs: b.uninserted}); err != nil {
			return err
		}
		b.uninserted = b.uninserted[:0]
	}
	if len(b.turns) > 0 {
		others, err := b.tx.TurnTakeMany(ctx, store.TurnTakeManyParams{Consumer: b.consumer, At: b.turnAt, Turns: b.turns})
		if err != nil {
			return err
		}
		if len(others) > 0 {
			// Bound to another copy meanwhile, which the key's lock should
			// have kept out: the run with savepoints settles it message by
			// message.
			return errRerun
		}
		b.turns = b.turns[:0]
	}
	return nil
}

// flushMoves writes the deferred outcomes, key moves and retry clears.
func (b *batchTx) flushMoves(ctx context.Context) error {
	if len(b.outcomeRows) > 0 {
		if err := b.tx.InboxSetOutcomeMany(ctx, store.InboxSetOutcomeManyParams{Consumer: b.consumer, Rows: b.outcomeRows}); err != nil {
			return err
		}
		b.outcomeRows, b.outcomes = b.outcomeRows[:0], nil
	}
	if len(b.moveRows) > 0 {
		won, err := b.tx.KeyAdvanceMany(ctx, store.KeyAdvanceManyParams{Consumer: b.consumer, Moves: b.moveRows, At: b.movedAt})
		if err != nil {
			return err
		}
		if won != len(b.moveRows) {
			// Cannot happen under the key locks; a run with savepoints
			// settles it delivery by delivery.
			return errRerun
		}
		b.moveRows, b.moves = b.moveRows[:0], nil
	}
	if len(b.clears) > 0 {
		if err := b.tx.RetryClearMany(ctx, store.RetryClearManyParams{Consumer: b.consumer, IDs: b.clears}); err != nil {
			return err
		}
		b.clears = b.clears[:0]
	}
	return nil
}

// InboxInsert answers from the prefetch when it decided the identity.
// A later copy of an identity whose row the batch knows (existing) is
// answered without a statement too: the row is there.
func (b *batchTx) InboxInsert(ctx context.Context, r store.InboxRow) (bool, error) {
	id := store.Identity{Source: r.Source, ID: r.ID}
	if r.Consumer == b.consumer {
		if ok, found := b.inserted[id]; found {
			delete(b.inserted, id)
			return ok, nil
		}
		if _, known := b.existing[id]; known {
			return false, nil
		}
	}
	return b.tx.InboxInsert(ctx, r)
}

// InboxGet reads an identity, after its deferred outcome is written: the
// other deferred writes (key moves, retry clears) do not touch the inbox
// row, so an identity with none pending is read at once. A re-sent copy
// of a message applied earlier in the batch costs no flush of the
// batch's key moves, and the first read of an identity recorded before
// the batch comes from the prefetch (existing), without a statement.
func (b *batchTx) InboxGet(ctx context.Context, p store.MessageRef) (store.InboxRow, error) {
	id := store.Identity{Source: p.Source, ID: p.ID}
	_, pending := b.outcomes[id]
	if r, ok := b.existing[id]; ok && !pending && !b.provisional[id] && p.Consumer == b.consumer {
		// Read in the prefetch, or inserted by it and applied by its
		// first copy without a write: the batch has not changed it.
		return r, nil
	}
	if (!pending && len(b.uninserted) == 0) || p.Consumer != b.consumer {
		return b.tx.InboxGet(ctx, p)
	}
	if err := b.flush(ctx); err != nil {
		return store.InboxRow{}, err
	}
	return b.tx.InboxGet(ctx, p)
}

// InboxSetOutcome is deferred in an optimistic run.
func (b *batchTx) InboxSetOutcome(ctx context.Context, p store.InboxSetOutcomeParams) error {
	if !b.optimistic || p.Consumer != b.consumer {
		return b.tx.InboxSetOutcome(ctx, p)
	}
	k := store.Identity{Source: p.Source, ID: p.ID}
	if b.provisional[k] {
		delete(b.provisional, k)
		if p.Outcome == seqboxtype.Applied && p.ResultReference == "" {
			return nil // the row as inserted: existing still holds it
		}
	}
	delete(b.existing, k)
	row := store.OutcomeRow{Identity: k, Outcome: p.Outcome, ProcessedAt: p.ProcessedAt, ResultReference: p.ResultReference}
	if i, ok := b.outcomes[k]; ok {
		b.outcomeRows[i] = row
		return nil
	}
	if b.outcomes == nil {
		b.outcomes = map[store.Identity]int{}
	}
	b.outcomes[k] = len(b.outcomeRows)
	b.outcomeRows = append(b.outcomeRows, row)
	return nil
}

// InboxDelete forgets an identity, after the deferred writes.
func (b *batchTx) InboxDelete(ctx context.Context, p store.MessageRef) error {
	if p.Consumer == b.consumer {
		delete(b.existing, store.Identity{Source: p.Source, ID: p.ID})
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	return b.tx.InboxDelete(ctx, p)
}

// uninsert takes back, in an optimistic run, the inbox row the prefetch
// inserted for an identity that stopped before its handler: the only
// write of such a delivery (pipeline.undoable), which a savepoint would
// otherwise roll back. An identity the prefetch did not insert, or one
// sent twice in the batch (its later copy was answered from the row),
// ends the run instead (errRerun).
func (b *batchTx) uninsert(ctx context.Context, p store.MessageRef) error {
	id := store.Identity{Source: p.Source, ID: p.ID}
	_, repeated := b.existing[id]
	if !b.provisional[id] || repeated || p.Consumer != b.consumer {
		return errRerun
	}
	delete(b.provisional, id)
	b.uninserted = append(b.uninserted, id)
	return nil
}

// KeyLock serves a key state from memory when this transaction holds it.
func (b *batchTx) KeyLock(ctx context.Context, p store.KeyRef) (store.KeyState, error) {
	if ks, ok := b.keys[p.Key]; ok && p.Consumer == b.consumer {
		return ks, nil
	}
	if err := b.flush(ctx); err != nil {
		return store.KeyState{}, err
	}
	ks, err := b.tx.KeyLock(ctx, p)
	if err == nil && b.keys != nil && p.Consumer == b.consumer {
		b.keys[p.Key] = ks
	}
	return ks, err
}

// forget drops a key state that a write changed in a way memory does not
// follow.
func (b *batchTx) forget(key string) {
	delete(b.keys, key)
}

// KeyEnsure creates a key row if missing.
func (b *batchTx) KeyEnsure(ctx context.Context, p store.KeyEnsureParams) error {
	b.forget(p.Key)
	return b.tx.KeyEnsure(ctx, p)
}

// KeyAdvance is deferred for a key held in memory: the compare-and-set
// is decided against the state the transaction holds under the lock.
func (b *batchTx) KeyAdvance(ctx context.Context, p store.KeyAdvanceParams) (bool, error) {
	key, next, at := p.Key, p.Next, p.At
	ks, ok := b.keys[key]
	if !b.optimistic || !ok || p.Consumer != b.consumer {
		if err := b.flush(ctx); err != nil {
			return false, err
		}
		b.forget(key)
		return b.tx.KeyAdvance(ctx, p)
	}
	if !sameVersion(ks.Version, p.Prev) {
		return false, nil
	}
	if i, ok := b.moves[key]; ok {
		b.moveRows[i].Next = next
	} else {
		if b.moves == nil {
			b.moves = map[string]int{}
		}
		b.moves[key] = len(b.moveRows)
		b.moveRows = append(b.moveRows, store.KeyMove{Key: key, Prev: ks.Version, Next: next})
	}
	v := next
	ks.Version, ks.UpdatedAt, b.movedAt = &v, at, at
	b.keys[key] = ks
	return true, nil
}

func sameVersion(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// KeyBlock blocks a key, after the deferred writes.
func (b *batchTx) KeyBlock(ctx context.Context, p store.KeyBlockParams) error {
	if err := b.flush(ctx); err != nil {
		return err
	}
	b.forget(p.Key)
	return b.tx.KeyBlock(ctx, p)
}

// KeyUnblock clears a key's block, after the deferred writes.
func (b *batchTx) KeyUnblock(ctx context.Context, p store.KeyUnblockParams) error {
	if err := b.flush(ctx); err != nil {
		return err
	}
	b.forget(p.Key)
	return b.tx.KeyUnblock(ctx, p)
}

// ParkedInsert parks a message; the key now has something parked.
func (b *batchTx) ParkedInsert(ctx context.Context, p store.Parked) error {
	if ks, ok := b.keys[p.PartitionKey]; ok {
		ks.HasParked = true
		b.keys[p.PartitionKey] = ks
	}
	return b.tx.ParkedInsert(ctx, p)
}

// RetryRecord counts a failed attempt; the key now has a retry.
func (b *batchTx) RetryRecord(ctx context.Context, r store.RetryRow) (store.RetryCount, error) {
	delete(b.aheadBound, store.Identity{Source: r.Source, ID: r.ID})
	b.retryWritten(r.PartitionKey)
	if err := b.flush(ctx); err != nil {
		return store.RetryCount{}, err
	}
	if ks, ok := b.keys[r.PartitionKey]; ok {
		ks.HasRetries = true
		b.keys[r.PartitionKey] = ks
	}
	return b.tx.RetryRecord(ctx, r)
}

// RetryOnKey reads the key's retrying identity, after the deferred
// writes.
func (b *batchTx) RetryOnKey(ctx context.Context, p store.KeyRef) (store.RetryRow, error) {
	if err := b.flush(ctx); err != nil {
		return store.RetryRow{}, err
	}
	return b.tx.RetryOnKey(ctx, p)
}

// noOtherRetrying reports, without a statement, that no identity but
// self has a retry row on key, so no other holds its turn: an optimistic
// run read the key's rows under its lock (retryIDs), and has since
// written none on it and deleted every other. False when it cannot tell:
// the caller reads (retryOnKey). Guarded by
// TestOptimisticBatchReadsNoTurnPerMessage and the gate's tests.
func (b *batchTx) noOtherRetrying(key string, self store.Identity) bool {
	ids, read := b.retryIDs[key]
	if !b.optimistic || !read || b.retryAdded[key] {
		return false
	}
	for _, id := range ids {
		if id != self && !b.cleared[id] {
			return false
		}
	}
	return true
}

// retryWritten notes a retry row written on key (noOtherRetrying).
func (b *batchTx) retryWritten(key string) {
	if b.retryAdded == nil {
		b.retryAdded = map[string]bool{}
	}
	b.retryAdded[key] = true
}

// retryOnKey reads the key's retrying identity; false when none.
//
// The store tells a retry row whose identity settled (stale) from one
// that holds the key's turn by the identity's inbox row, and an
// optimistic run records the identities it inserted as applied until
// their deliveries say otherwise (provisional). So the row of one that
// holds the turn elsewhere, whose copy is in this batch after the
// message asking (its decision being asked by a Deliver, or by another
// process), read as stale, and that message went ahead of the turn's
// holder to the agent (TestTurnHolderWhoseCopyIsInTheBatchKeepsTheTurn;
// the state-machine test found it). An identity the run inserted has no
// row committed before it: with a retry row on the key, read under the
// key's lock (retryIDs) and not cleared by this run, it holds the turn.
// A key the run created has had no rows read (a retry row can stand
// without its key's row: the failed attempt that created the key rolled
// it back): they are read then, under the lock the gate holds
// (TestRetryingMessageWhoseCopyIsInTheBatchKeepsTheTurn).
func (b *batchTx) retryOnKey(ctx context.Context, consumer, key string) (store.RetryRow, bool, error) {
	r, err := b.RetryOnKey(ctx, store.KeyRef{Consumer: consumer, Key: key})
	if !errors.Is(err, store.ErrNotFound) {
		return r, err == nil, err
	}
	if consumer == b.consumer && b.optimistic && len(b.provisional) > 0 {
		if _, read := b.retryIDs[key]; !read {
			ids, err := b.tx.RetryRowsOnKeys(ctx, store.KeysRef{Consumer: consumer, Keys: []string{key}})
			if err != nil {
				return r, false, err
			}
			if b.retryIDs == nil {
				b.retryIDs = map[string][]store.Identity{}
			}
			b.retryIDs[key] = ids[key]
		}
		for _, id := range b.retryIDs[key] {
			if b.provisional[id] && !b.cleared[id] {
				return store.RetryRow{Consumer: consumer, PartitionKey: key, Source: id.Source, ID: id.ID}, true, nil
			}
		}
	}
	return r, false, nil
}

// RetryClear is deferred in an optimistic run.
func (b *batchTx) RetryClear(ctx context.Context, p store.MessageRef) error {
	if id := (store.Identity{Source: p.Source, ID: p.ID}); p.Consumer == b.consumer {
		if _, ok := b.aheadBound[id]; ok {
			b.aheadBound[id] = ""
		}
	}
	if p.Consumer == b.consumer {
		if b.cleared == nil {
			b.cleared = map[store.Identity]bool{}
		}
		b.cleared[store.Identity{Source: p.Source, ID: p.ID}] = true
	}
	if !b.optimistic || p.Consumer != b.consumer {
		return b.tx.RetryClear(ctx, p)
	}
	b.clears = append(b.clears, store.Identity{Source: p.Source, ID: p.ID})
	return nil
}
