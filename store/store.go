// Package store is seqbox's database driver: what the pipeline needs from a
// database, in one transaction per batch in which the inbox identity, the
// ordering gate, the parked messages and the handler's own writes commit
// together. It is shaped like river's riverdriver: one Executor runs every
// statement, on the pool or inside a transaction (ExecutorTx); methods take
// parameter structs and are named noun first (InboxInsertMany, KeyLock,
// DeadLetterResolve); the states written to rows are typed, in the leaf
// package seqboxtype.
//
// The interfaces here are not for implementation outside this module. They
// follow the engine and change with it, without notice; a new database is
// added as a store inside seqbox (see store/sqlite and store/postgres),
// where store/drivertest checks every method. Applications open a store
// with store/sqlite or store/postgres and pass it to seqbox.Config; the
// operator's reads (DeadLetterList, KeyViewList, AuditList, Counts) are
// safe to call from tools.
//
// Row types here are shared by the consumer (the root package) and every
// store: stores never import the root package.
package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ErrNotFound is returned by lookups of a single row that does not exist.
var ErrNotFound = errors.New("not found")

// ErrForeignDatabase is returned when a database is not empty or seqbox's
// (store.Exclusive), or a file is not a SQLite database. Nothing in it is
// touched.
var ErrForeignDatabase = errors.New("not a seqbox database")

// ErrStorageFull is matched by writes that failed because the disk is
// full or failing. Nothing of the transaction was applied.
var ErrStorageFull = errors.New("the disk is full or failing")

// ErrSchemaTooNew is returned when a database was migrated by a newer
// seqbox than this one.
var ErrSchemaTooNew = errors.New("database schema is newer than this seqbox")

// Access says what opening a database may do to it.
type Access int

const (
	// Adopt creates and migrates seqbox's own objects next to the
	// application's (the library default). Nothing else is touched.
	Adopt Access = iota
	// Exclusive accepts only an empty or seqbox-only database, and leaves
	// anything else byte for byte untouched (the CLI's creating commands:
	// replay, demo, chaos, bench).
	Exclusive
	// ReadOnly writes nothing at all and requires seqbox's schema to exist
	// (inspection commands). It works on a read-only file.
	ReadOnly
)

// String names the access mode.
func (a Access) String() string {
	switch a {
	case Adopt:
		return "adopt"
	case Exclusive:
		return "exclusive"
	case ReadOnly:
		return "read-only"
	}
	return "unknown access"
}

// Store is one seqbox database: its pool, and the transactions batches run
// in.
type Store interface {
	// Executor runs each method on the pool, as a statement (or a short
	// transaction) of its own: the operator's reads and admin writes, and
	// whatever runs outside a batch.
	Executor() Executor
	// Begin opens the transaction one batch of deliveries runs in.
	Begin(ctx context.Context) (ExecutorTx, error)
	// UnwrapTx runs the methods inside a transaction the caller opened on
	// DB() and will commit or roll back itself; the returned ExecutorTx's
	// Commit and Rollback must not be called.
	UnwrapTx(tx *sql.Tx) ExecutorTx
	// DB is the underlying pool, for business tables the caller owns.
	DB() *sql.DB
	// Close releases the pool.
	Close() error
}

// ExecutorTx is an Executor inside one transaction: a batch's, or the
// caller's (Store.UnwrapTx).
type ExecutorTx interface {
	Executor
	// SQL is the transaction the handler writes its business effects in.
	SQL() *sql.Tx
	// Savepoint opens a savepoint.
	Savepoint(ctx context.Context, name string) error
	// SavepointRollback undoes everything since the savepoint, which stays
	// open.
	SavepointRollback(ctx context.Context, name string) error
	// SavepointRelease closes the savepoint, keeping its work.
	SavepointRelease(ctx context.Context, name string) error
	// Commit commits the transaction; ErrStorageFull when the disk is full.
	Commit() error
	// Rollback abandons it.
	Rollback() error
}

// Executor runs seqbox's statements, on the pool or in a transaction. Reads
// named Lock lock the rows they read until the end of the transaction.
// Methods named Many take many rows in one statement, or a few in bounded
// chunks.
type Executor interface {
	Inbox
	Keys
	ParkedMessages
	Turns
	DeadLetters
	Audit
	Decisions
	Consumers
	Requests
	Effects
	Outbox
	Gateway
}

// Inbox is the inbox's identities and the business keys they applied.
type Inbox interface {
	// InboxInsert inserts an identity; false means it already existed (the
	// primary key decided, never a prior query).
	InboxInsert(ctx context.Context, r InboxRow) (bool, error)
	// InboxInsertMany inserts identities; inserted[i] is false when rows[i]
	// already existed (the primary key decided). rows must not repeat an
	// identity.
	InboxInsertMany(ctx context.Context, rows []InboxRow) (inserted []bool, err error)
	// InboxGet reads an identity; ErrNotFound when it was never recorded.
	InboxGet(ctx context.Context, p MessageRef) (InboxRow, error)
	// InboxGetMany reads the identities of IDs that are recorded, as
	// InboxGet reads one; an identity never recorded is absent from the
	// map.
	InboxGetMany(ctx context.Context, p InboxGetManyParams) (map[Identity]InboxRow, error)
	// InboxList reads a consumer's identities of a tenant, a cause
	// (causationid), a contract (dataschema), or of several, newest
	// first, at most Limit; at least one of them is required.
	InboxList(ctx context.Context, p InboxListParams) ([]InboxRow, error)
	// InboxSeen reports the recorded outcome and payload hash of an
	// identity, without locking: a fast path before expensive work, never
	// the arbiter. ErrNotFound when it was never recorded.
	InboxSeen(ctx context.Context, p MessageRef) (Seen, error)
	// InboxSetOutcome records the outcome an identity ended in.
	InboxSetOutcome(ctx context.Context, p InboxSetOutcomeParams) error
	// InboxSetOutcomeMany records the outcome of many identities.
	InboxSetOutcomeMany(ctx context.Context, p InboxSetOutcomeManyParams) error
	// InboxDelete forgets an identity (redrive of a dead-lettered message).
	InboxDelete(ctx context.Context, p MessageRef) error
	// InboxDeleteMany forgets many identities.
	InboxDeleteMany(ctx context.Context, p IdentitiesRef) error
	// InboxPurge deletes at most Limit identities whose retention ended
	// before Now (and not before From), oldest first, and reports how
	// many it deleted and the latest retention end among them. With each
	// identity go its decision and claim, its ledger calls that ended,
	// its business key's claim, its audit rows and its resolved dead
	// letters; an uncertain or pending call and an open dead letter stay.
	InboxPurge(ctx context.Context, p InboxPurgeParams) (InboxPurgeResult, error)
	// BusinessKeyClaim inserts (consumer, businesskey); false means another
	// identity already applied that effect.
	BusinessKeyClaim(ctx context.Context, p BusinessKeyClaimParams) (bool, error)
}

// Keys is the ordering state of keys: versions, blocks, and the views of them.
type Keys interface {
	// KeyLock reads the ordering state of a key and locks it until the end
	// of the transaction; ErrNotFound if never seen.
	KeyLock(ctx context.Context, p KeyRef) (KeyState, error)
	// KeyLockMany reads and locks the ordering state of the keys that
	// exist, in key order (so concurrent batches lock in one order), with
	// HasParked and HasRetries read under the locks. Keys never seen are
	// absent.
	KeyLockMany(ctx context.Context, p KeyLockManyParams) (map[string]KeyState, error)
	// KeyEnsure creates the key row with no version if it does not exist.
	KeyEnsure(ctx context.Context, p KeyEnsureParams) error
	// KeyEnsureMany creates the key rows that do not exist, with no
	// version.
	KeyEnsureMany(ctx context.Context, p KeyEnsureManyParams) error
	// KeyAdvance is the compare-and-set on the key version: it moves from
	// Prev (nil = no version yet) to Next and reports whether it won.
	KeyAdvance(ctx context.Context, p KeyAdvanceParams) (bool, error)
	// KeyAdvanceMany runs the compare-and-set of each move and reports how
	// many won; every move names a different key.
	KeyAdvanceMany(ctx context.Context, p KeyAdvanceManyParams) (int, error)
	// KeyBlock blocks a key behind a failed message (Source and ID are
	// empty for a gap block).
	KeyBlock(ctx context.Context, p KeyBlockParams) error
	// KeyUnblock clears the block.
	KeyUnblock(ctx context.Context, p KeyUnblockParams) error
	// KeyVersion reads a key's committed version (nil: none), unlocked.
	KeyVersion(ctx context.Context, p KeyRef) (*int64, error)
	// KeyViewGet returns one key with what is parked behind it.
	KeyViewGet(ctx context.Context, p KeyRef) (KeyView, error)
	// KeyViewList lists key views; only blocked or holding keys when Stuck.
	KeyViewList(ctx context.Context, p KeyViewListParams) ([]KeyView, error)
	// KeyNameList names every key of a consumer, in byte order: all a
	// search by name reads of keys it does not show.
	KeyNameList(ctx context.Context, p KeyNameListParams) ([]string, error)
	// KeyListBlockedBefore lists keys blocked since before Before.
	KeyListBlockedBefore(ctx context.Context, p KeyListBlockedBeforeParams) ([]KeyState, error)
}

// ParkedMessages is the messages parked behind their key: held for a gap, blocked behind a failure.
type ParkedMessages interface {
	// ParkedInsert stores a message durably so the broker copy can be
	// acked.
	ParkedInsert(ctx context.Context, p Parked) error
	// ParkedListInLine lists the held and blocked messages of a key, in
	// version order and then arrival order.
	ParkedListInLine(ctx context.Context, p KeyRef) ([]Parked, error)
	// ParkedList lists the parked messages of a key, every reason.
	ParkedList(ctx context.Context, p KeyRef) ([]Parked, error)
	// ParkedPage lists at most Limit of a key's parked messages, in
	// ParkedList's order, from after a cursor: a key blocked for a
	// weekend may have a hundred thousand behind it.
	ParkedPage(ctx context.Context, p ParkedPageParams) ([]Parked, error)
	// ParkedCollisionList lists at most Limit of a consumer's collisions
	// (messages parked for reusing an identity with another payload),
	// oldest first, through their own index: not every parked message.
	ParkedCollisionList(ctx context.Context, p ParkedCollisionListParams) ([]Parked, error)
	// ParkedOfIdentity lists one identity's parked messages, every
	// reason, oldest first.
	ParkedOfIdentity(ctx context.Context, p MessageRef) ([]Parked, error)
	// ParkedListDue lists held messages whose hold deadline is at or
	// before Now, one per key (the lowest version).
	ParkedListDue(ctx context.Context, p ParkedListDueParams) ([]Parked, error)
	// ParkedDelete removes one parked row.
	ParkedDelete(ctx context.Context, seq int64) error
	// ParkedSetReason moves every parked row of a key from one reason to
	// another (held to blocked when the key blocks, and back), with a new
	// hold deadline (zero: none).
	ParkedSetReason(ctx context.Context, p ParkedSetReasonParams) error
	// ParkedStartHolds gives the held messages of a key that have no hold
	// deadline, and with Now those whose deadline ran out by Now (they
	// waited behind a retrying predecessor, which the sweep lets be), the
	// deadline Until.
	ParkedStartHolds(ctx context.Context, p ParkedStartHoldsParams) error
	// ParkedRehold puts one parked message back as held until Until (a
	// message let out of the parked table that failed transiently waits
	// out its backoff). Detail replaces the row's detail, so that the
	// stuck-keys view says why it waits now.
	ParkedRehold(ctx context.Context, p ParkedReholdParams) error
}

// Turns is the failed attempts and the key's turns they hold, and the gaps passed over.
type Turns interface {
	// RetryRecord counts a failed attempt and returns the running total
	// and the first error seen.
	RetryRecord(ctx context.Context, r RetryRow) (RetryCount, error)
	// RetryClear forgets the attempts of an identity.
	RetryClear(ctx context.Context, p MessageRef) error
	// RetryClearMany forgets the attempts of many identities.
	RetryClearMany(ctx context.Context, p RetryClearManyParams) error
	// RetryOnKey returns the identity whose turn it is on a key: the
	// oldest retry row (attempts counted, or a turn taken) of an identity
	// that has not reached a final outcome since (it is not in the inbox, or is there as
	// held, blocked or pending); ErrNotFound when none.
	RetryOnKey(ctx context.Context, p KeyRef) (RetryRow, error)
	// RetryRowsOnKeys lists, for each of the keys that has any, the
	// identities with a retry row on it (a turn taken or attempts
	// counted), settled or not. Read under the keys' locks, it lets a
	// batch answer that no other identity holds a key's turn without a
	// RetryOnKey per message.
	RetryRowsOnKeys(ctx context.Context, p KeysRef) (map[string][]Identity, error)
	// TurnListStale lists, oldest first and at most Limit, the retry rows
	// (turns) of identities that have not reached a final outcome and were last seen
	// before Before, with their partition key and bound payload hash.
	TurnListStale(ctx context.Context, p TurnListStaleParams) ([]RetryRow, error)
	// TurnHeld reports whether the identity has a retry row (its key's
	// turn, TurnTake, or a counted failure).
	TurnHeld(ctx context.Context, p MessageRef) (bool, error)
	// TurnBoundTo returns the payload hash the identity's turn is bound to
	// ("" when it holds none, or one bound to no payload).
	TurnBoundTo(ctx context.Context, p MessageRef) (string, error)
	// TurnTakeMany is TurnTake for many messages without a business key:
	// it returns, for each identity whose turn is bound to another
	// payload (and left untouched), that payload's hash.
	TurnTakeMany(ctx context.Context, p TurnTakeManyParams) (map[Identity]string, error)
	// TurnBoundToMany is TurnBoundTo for many identities at once: the map
	// holds those that hold a turn.
	TurnBoundToMany(ctx context.Context, p IdentitiesRef) (map[Identity]string, error)
	// GapCovers reports whether a recorded gap of the key passed
	// over version Version.
	GapCovers(ctx context.Context, p GapCoversParams) (bool, error)
	// GapInsert records a known gap in a key's version history.
	GapInsert(ctx context.Context, g Gap) error
	// GapList lists the recorded gaps of a key.
	GapList(ctx context.Context, p KeyRef) ([]Gap, error)
	// TurnTake gives an identity its key's turn before its decision is
	// asked for: a retry row with no attempt counted, so that the key's
	// successors wait behind it (RetryOnKey) and its business key is
	// reserved (BusinessKeyInFlight) until its outcome is final (RetryClear). A row
	// already there keeps its attempts. The turn is bound to the payload
	// hash of the copy that took it first: TurnTake returns the hash it is
	// bound to, and a copy with another hash does not change the row (it
	// is a collision).
	TurnTake(ctx context.Context, p TurnTakeParams) (boundTo string, err error)
	// TurnWaits is how many deliveries of an identity ended in a wait
	// for a call or a decision running elsewhere (TurnTakeParams.Waited)
	// while it held its turn: 0 without a turn. The crash-loop bound
	// leaves them out of the broker's deliveries.
	TurnWaits(ctx context.Context, p MessageRef) (int, error)
}

// DeadLetters is the dead-letter queue.
type DeadLetters interface {
	// DeadLetterInsert stores the original envelope with the reason, and
	// returns the row's sequence number. When the identity (source and id
	// both given) has an open row of the same payload hash (a redrive of it
	// failed again), that row takes the failure instead
	// and keeps its number: its attempts add up, its reason, last error
	// and time are the new ones, Redrives counts one more, and History
	// gains a line saying so. A letter whose Seq is set is a redrive of
	// that row failing again: the row, while open, takes the failure the
	// same way, identity or none (a message rejected before it had one).
	DeadLetterInsert(ctx context.Context, letter DeadLetter) (int64, error)
	// DeadLetterGet reads one DLQ row by its sequence number.
	DeadLetterGet(ctx context.Context, p DeadLetterRef) (DeadLetter, error)
	// DeadLetterList lists a consumer's DLQ, oldest first; resolved rows
	// too when All.
	DeadLetterList(ctx context.Context, p DeadLetterListParams) ([]DeadLetter, error)
	// DeadLetterResolve marks one open DLQ row redriven or skipped: State
	// is how it was resolved; Resolution says it in words (who, why, what
	// came of a redrive).
	DeadLetterResolve(ctx context.Context, p DeadLetterResolveParams) error
}

// Audit is the record of outcomes that applied nothing, and the counts of a consumer's rows.
type Audit interface {
	// AuditInsert records a non-applied outcome. A duplicate is counted on
	// its inbox row rather than added as a row, and a collision is
	// recorded once per colliding payload: delivering again what was
	// already recorded adds no row (docs/design.md §14).
	AuditInsert(ctx context.Context, a AuditRow) error
	// AuditList lists audit rows for a consumer (and key, when not empty),
	// newest last, at most Limit.
	AuditList(ctx context.Context, p AuditListParams) ([]AuditRow, error)
	// Counts reports row counts for a consumer.
	Counts(ctx context.Context, consumer string) (Counts, error)
	// StuckCounts is Counts without what reads every identity or key
	// (InboxRows, Applied and Keys stay zero): the parked messages, dead
	// letters, blocked and retrying keys, gaps and the oldest stuck key,
	// each from a table or an index that holds only those. A console
	// polls it; Counts of a large inbox takes seconds.
	StuckCounts(ctx context.Context, consumer string) (Counts, error)
}

// Decisions is the agent path's decisions, their claims, and the business keys a decision reserves.
type Decisions interface {
	// DecisionClaimLive reports whether someone is deciding the identity
	// right now: a claim that has not run out at Now.
	DecisionClaimLive(ctx context.Context, p DecisionClaimParams) (bool, error)
	// LedgerTouched reports whether a call the effects ledger made for
	// the identity took effect or may have: a row of it pending,
	// uncertain or succeeded.
	LedgerTouched(ctx context.Context, p MessageRef) (bool, error)
	// LedgerOpen finds a call the effects ledger made for the identity
	// that is pending or uncertain (it may still take effect), and returns
	// its idempotency key and state; ErrNotFound when none is.
	LedgerOpen(ctx context.Context, p MessageRef) (OpenCall, error)
	// DecisionGet reads the agent decision recorded for an identity,
	// with the payload hash of the copy it was made for; ErrNotFound when
	// none.
	DecisionGet(ctx context.Context, p MessageRef) (Decision, error)
	// DecisionGetMany is DecisionGet for many identities at once: the map
	// holds those with a decision recorded.
	DecisionGetMany(ctx context.Context, p IdentitiesRef) (map[Identity]Decision, error)
	// DecisionRecord stores an agent decision unless one is already
	// recorded, and returns the recorded one: concurrent deciders converge
	// on the first, and a copy with another payload hash learns that the
	// identity's decision was made for another payload.
	DecisionRecord(ctx context.Context, p DecisionRecordParams) (Decision, error)
	// DecisionLook reads, in one statement, whether a decision is
	// recorded for the identity, its inbox outcome and whether it holds
	// a turn.
	DecisionLook(ctx context.Context, p MessageRef) (DecisionLook, error)
	// DecisionClaimMany is DecisionClaim for many identities and one
	// owner: it returns those it claimed (the others are claimed by
	// another owner whose claim has not run out at Now).
	DecisionClaimMany(ctx context.Context, p DecisionClaimManyParams) (map[Identity]bool, error)
	// DecisionClaim claims the right to decide an identity until Until,
	// for Owner: Claimed when no other owner holds an unexpired claim. The
	// claim ends with DecisionUnclaim, or runs out.
	DecisionClaim(ctx context.Context, p DecisionClaimParams) (DecisionClaim, error)
	// DecisionClaimExtend moves Owner's claim on to Until (the claimant's
	// heartbeat); false when Owner no longer holds it.
	DecisionClaimExtend(ctx context.Context, p DecisionClaimParams) (bool, error)
	// BusinessKeyLock, in a transaction, makes the business key's check
	// (BusinessKeyInFlight) and the turn that reserves it (TurnTake) one
	// step against other transactions, until this one ends: where write
	// transactions run side by side, a lock the others wait for (taken
	// outside any savepoint, since rolling one back would let it go); a
	// no-op where they run one at a time, and outside a transaction.
	BusinessKeyLock(ctx context.Context, p BusinessKeyRef) error
	// BusinessKeyInFlight returns another identity that took a turn for
	// the same business key before this one (or holds one while this one
	// has none, or holds one with a call whose outcome is unknown) and has
	// not reached a final outcome; ErrNotFound when none.
	BusinessKeyInFlight(ctx context.Context, p BusinessKeyRef) (Identity, error)
	// BusinessKeyTouched returns another identity of the same business key
	// that ended without applying (dead-lettered, skipped, stale,
	// expired) although a call it made through the effects ledger took
	// effect or may have (its row succeeded, pending or uncertain);
	// ErrNotFound when none. Asking for the effect again could do it twice.
	BusinessKeyTouched(ctx context.Context, p BusinessKeyRef) (Identity, error)
	// DecisionUnclaim drops Owner's claim on an identity.
	DecisionUnclaim(ctx context.Context, p DecisionUnclaimParams) error
}

// Consumers is the consumers' registrations and heartbeats.
type Consumers interface {
	// ConsumerRegister records (or refreshes) a consumer's registration:
	// its policies, handler kind and heartbeat. The last writer wins.
	ConsumerRegister(ctx context.Context, r Registration) error
	// ConsumerHeartbeat moves a registered consumer's heartbeat to At.
	ConsumerHeartbeat(ctx context.Context, p ConsumerHeartbeatParams) error
	// ConsumerGet reads one consumer's registration; ErrNotFound when it
	// never registered.
	ConsumerGet(ctx context.Context, consumer string) (Registration, error)
	// ConsumerList lists every registered consumer, by name.
	ConsumerList(ctx context.Context) ([]Registration, error)
}

// Requests is the operator requests a consumer runs (docs/design.md, "Operator requests and registration").
type Requests interface {
	// RequestInsert records an operator request in state RequestPending and
	// returns its sequence number. Requests wait for the consumer that owns
	// the handler (docs/design.md §9): the CLI and the admin API write them; only
	// the owning consumer executes them.
	RequestInsert(ctx context.Context, r OperatorRequest) (int64, error)
	// RequestGet reads one request by its sequence number.
	RequestGet(ctx context.Context, seq int64) (OperatorRequest, error)
	// RequestListPending lists a consumer's pending requests, oldest first.
	RequestListPending(ctx context.Context, consumer string) ([]OperatorRequest, error)
	// RequestClaim moves a pending request to RequestRunning for Taker;
	// false means it was no longer pending (taken or cancelled).
	RequestClaim(ctx context.Context, p RequestClaimParams) (bool, error)
	// RequestFinish records a running request's result: state RequestDone
	// or RequestFailed, what the messages reached (JSON) and the error.
	RequestFinish(ctx context.Context, p RequestFinishParams) error
	// RequestAlive renews a running request's sign of life (AliveAt) for
	// its taker; false when the request is not running under Taker any
	// more (it was abandoned).
	RequestAlive(ctx context.Context, p RequestAliveParams) (bool, error)
	// RequestListRunning lists a consumer's running requests, oldest
	// first.
	RequestListRunning(ctx context.Context, consumer string) ([]OperatorRequest, error)
	// RequestAbandon fails a running request whose sign of life is still
	// AliveAt, naming its taker: a process killed while it ran one left
	// it running. False when it was renewed or ended meanwhile.
	RequestAbandon(ctx context.Context, p RequestAbandonParams) (bool, error)
	// RequestCancel moves a pending request to RequestCancelled; false
	// means a consumer took it first.
	RequestCancel(ctx context.Context, p RequestCancelParams) (bool, error)
}

// Effects is the effects ledger (package effects).
type Effects interface {
	// EffectGet reads the ledger row of an idempotency key; ErrNotFound
	// when none. Only the keys of open calls (not succeeded) are
	// indexed: a succeeded call's key is found by a scan of the ledger
	// (docs/design.md §11).
	EffectGet(ctx context.Context, idempotencyKey string) (EffectRow, error)
	// EffectGetCall reads the ledger row of an identity and action (its
	// primary key); ErrNotFound when none.
	EffectGetCall(ctx context.Context, c EffectCall) (EffectRow, error)
	// EffectInsertPending inserts a pending row with one call; false when
	// a row of the identity and action exists, or an open call (not
	// succeeded) under the key.
	EffectInsertPending(ctx context.Context, p EffectInsertPendingParams) (bool, error)
	// EffectTransition moves a row from From to To at At; false when it
	// was not in From. A move to pending counts a call and sets the
	// lease to LeaseUntil.
	EffectTransition(ctx context.Context, p EffectTransitionParams) (bool, error)
	// EffectRecord records a call's outcome (To, Ref, LastError) on a row
	// in one of the states From; a row in another state is left alone.
	// The first time a row turns uncertain is kept. With Calls, a row
	// left alone answers ErrNotFound.
	EffectRecord(ctx context.Context, p EffectRecordParams) error
	// EffectRenewLease moves the lease of a pending row to Until (the
	// caller's heartbeat); a row no longer pending is left alone.
	EffectRenewLease(ctx context.Context, p EffectRenewLeaseParams) error
	// EffectList lists ledger rows, oldest change first, at most Limit.
	EffectList(ctx context.Context, p EffectListParams) ([]EffectRow, error)
	// EffectCountUncertain counts, by consumer and action, the uncertain
	// rows and the pending ones whose lease ran out by now.
	EffectCountUncertain(ctx context.Context, now time.Time) ([]EffectUncertainCount, error)
}

// Outbox is the outbox and its relay's lease (package outbox).
type Outbox interface {
	// OutboxInsert adds an event to the outbox and returns its Seq.
	OutboxInsert(ctx context.Context, e OutboxEvent) (int64, error)
	// OutboxListReady lists at most Limit unpublished events in Seq
	// order, leaving out every event at or behind a refused event of its
	// key whose next attempt is after Now: a key is read from its oldest
	// unpublished event or not at all.
	OutboxListReady(ctx context.Context, p OutboxListReadyParams) ([]OutboxEvent, error)
	// OutboxMarkPublished marks the events published at At.
	OutboxMarkPublished(ctx context.Context, p OutboxMarkPublishedParams) error
	// OutboxPrune removes at most Limit events published before Before,
	// lowest Seq first, and reports how many it removed; an unpublished
	// event is never removed.
	OutboxPrune(ctx context.Context, p OutboxPruneParams) (int64, error)
	// OutboxRefusalRecord counts a refusal of an event, with its error and
	// the time it is tried again.
	OutboxRefusalRecord(ctx context.Context, p OutboxRefusalRecordParams) error
	// OutboxRefusalList lists the keys whose oldest unpublished event the
	// publisher refused, in Seq order.
	OutboxRefusalList(ctx context.Context) ([]OutboxRefusal, error)
	// OutboxBacklog reports what the outbox holds unpublished.
	OutboxBacklog(ctx context.Context) (OutboxBacklog, error)
	// OutboxLeaseTake takes the relay lease Name for Owner until Until,
	// or renews Owner's; false when another owner holds it past Now.
	OutboxLeaseTake(ctx context.Context, p OutboxLeaseParams) (bool, error)
	// OutboxLeaseRelease gives up Owner's lease Name.
	OutboxLeaseRelease(ctx context.Context, p OutboxLeaseParams) error
}

// Gateway is what seqbox serve keeps beside the inbox: the envelopes of applied events and the tombstones of purged ones.
type Gateway interface {
	// GatewayEnvelopeInsert keeps the envelope of an applied event,
	// unless one is kept for the identity.
	GatewayEnvelopeInsert(ctx context.Context, e GatewayEnvelope) error
	// GatewayEnvelopeGet reads the kept envelope of an identity;
	// ErrNotFound when none.
	GatewayEnvelopeGet(ctx context.Context, p MessageRef) ([]byte, error)
	// GatewayEnvelopePurge removes at most Limit of the consumer's
	// envelopes applied before Before, oldest first, leaving a tombstone
	// of each at Now, in one transaction (the executor's, or one of its
	// own on the pool); it reports how many it removed.
	GatewayEnvelopePurge(ctx context.Context, p GatewayEnvelopePurgeParams) (int64, error)
	// GatewayTombstoneCount counts the consumer's tombstones.
	GatewayTombstoneCount(ctx context.Context, consumer string) (int64, error)
	// GatewayTombstoneTake deletes the tombstones of the identities and
	// reports how many there were: identities delivered again after
	// retention purged them.
	GatewayTombstoneTake(ctx context.Context, p GatewayTombstoneTakeParams) (int64, error)
	// GatewayTombstonePurge deletes the consumer's tombstones of purges
	// before Before and reports how many.
	GatewayTombstonePurge(ctx context.Context, p GatewayTombstonePurgeParams) (int64, error)
	// GatewayAccept records, in order, the identities of the copies that
	// are their identity's first at the gateway's ingest (the unique key
	// decides a race), and says of each copy whether it was new or which
	// copy came first: ingest answers a copy seen before as a duplicate
	// (same payload hash) or a collision (another), and queues only the
	// new ones, in the same transaction.
	GatewayAccept(ctx context.Context, p GatewayAcceptParams) ([]GatewayAccepted, error)
	// GatewayAcceptedPurge removes at most Limit of the consumer's
	// accepted identities first seen before Before, oldest first, and
	// reports how many.
	GatewayAcceptedPurge(ctx context.Context, p GatewayAcceptedPurgeParams) (int64, error)
	// GatewaySecret returns the secret kept under Name, keeping Candidate
	// first when there is none (the first writer wins a race).
	GatewaySecret(ctx context.Context, p GatewaySecretParams) (string, error)
}
