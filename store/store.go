// Package store defines what the seqbox pipeline needs from a database: one
// transaction per batch in which the inbox identity, the ordering gate, the
// parked messages and the handler's own writes commit together.
//
// Types here are shared by the root package and every store implementation,
// in the way river's rivertype is: stores never import the root package.
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

// OutcomeDuplicate is the duplicate outcome's name, which Tx.Audit
// records on the inbox row instead of as an audit row.
const OutcomeDuplicate = "duplicate"

// DeadLetterState is where a DLQ row stands.
type DeadLetterState string

// The states of a DLQ row.
const (
	// DeadLetterOpen: waiting for an operator.
	DeadLetterOpen DeadLetterState = "open"
	// DeadLetterRedriven: sent back through the pipeline, and settled.
	DeadLetterRedriven DeadLetterState = "redriven"
	// DeadLetterRedriveFailed: redriven, and dead-lettered or rejected
	// again (a new row holds it).
	DeadLetterRedriveFailed DeadLetterState = "redrive_failed"
	// DeadLetterSkipped: resolved without applying, with who and why.
	DeadLetterSkipped DeadLetterState = "skipped"
)

// ParkedInsert reasons: why a message sits in the parked table.
const (
	ParkHeld            = "held"
	ParkBlocked         = "blocked"
	ParkCollision       = "collision"
	ParkVersionConflict = "version_conflict"
)

// Store opens batch transactions and answers the operator's questions.
type Store interface {
	// Begin opens the transaction one batch of deliveries runs in.
	Begin(ctx context.Context) (Tx, error)
	// Within runs the pipeline inside a transaction the caller opened on
	// DB() and will commit or roll back itself; the returned Tx's Commit
	// and Rollback must not be called.
	Within(tx *sql.Tx) Tx
	// Operator returns the read and admin queries that run outside the
	// pipeline (DLQ, keys, counts, retention).
	Operator() Operator
	// Control holds consumer registrations and operator requests.
	Control() Control
	// DB is the underlying pool, for business tables the caller owns.
	DB() *sql.DB
	// Close releases the pool.
	Close() error
}

// Tx is one batch transaction. Every method runs inside it.
type Tx interface {
	// SQL is the transaction the handler writes its business effects in.
	SQL() *sql.Tx
	Savepoint(ctx context.Context, name string) error
	SavepointRollback(ctx context.Context, name string) error
	SavepointRelease(ctx context.Context, name string) error

	// InboxInsert inserts the identity; false means it already existed (the
	// primary key decided, never a prior query).
	InboxInsert(ctx context.Context, r InboxRow) (bool, error)
	// InboxGet reads an existing identity.
	InboxGet(ctx context.Context, consumer, source, id string) (InboxRow, error)
	// InboxSetOutcome records the outcome the identity ended in.
	InboxSetOutcome(ctx context.Context, consumer, source, id, outcome string, processedAt *time.Time) error
	// InboxDelete forgets an identity (redrive of a dead-lettered message).
	InboxDelete(ctx context.Context, consumer, source, id string) error
	// BusinessKeyClaim inserts (consumer, businesskey); false means another
	// identity already applied that effect.
	BusinessKeyClaim(ctx context.Context, consumer, businessKey, source, id string, at time.Time) (bool, error)

	// KeyLock reads the ordering state of a key and locks it until the end of
	// the transaction; ErrNotFound if never seen.
	KeyLock(ctx context.Context, consumer, key string) (KeyState, error)
	// KeyEnsure creates the key row with no version if it does not exist.
	KeyEnsure(ctx context.Context, consumer, key string, at time.Time) error
	// KeyAdvance is the compare-and-set on the key version: it moves from
	// prev (nil = no version yet) to next and reports whether it won.
	KeyAdvance(ctx context.Context, consumer, key string, prev *int64, next int64, at time.Time) (bool, error)
	// KeyBlock blocks a key behind a failed message (source/id may be
	// empty for a gap block).
	KeyBlock(ctx context.Context, consumer, key, source, id, reason string, at time.Time) error
	// KeyUnblock clears the block.
	KeyUnblock(ctx context.Context, consumer, key string, at time.Time) error

	// ParkedInsert stores a message durably so the broker copy can be acked.
	ParkedInsert(ctx context.Context, p Parked) error
	// ParkedListWaiting lists the held and blocked messages of a key, in version
	// order and then arrival order.
	ParkedListWaiting(ctx context.Context, consumer, key string) ([]Parked, error)
	// ParkedDelete removes one parked row.
	ParkedDelete(ctx context.Context, seq int64) error
	// ParkedSetReason moves every parked row of a key from one reason to
	// another (held to blocked when the key blocks, and back), with a new
	// hold deadline (zero: none).
	ParkedSetReason(ctx context.Context, consumer, key, from, to string, holdUntil time.Time) error

	// ParkedStartHolds gives the held messages of a key that have no hold
	// deadline (they waited behind a retry) the deadline until.
	ParkedStartHolds(ctx context.Context, consumer, key string, until time.Time) error

	// RetryRecord counts a failed attempt and returns the running total and
	// the first error seen.
	RetryRecord(ctx context.Context, r RetryRow) (attempts int, firstError string, err error)
	// RetryClear forgets the attempts of an identity.
	RetryClear(ctx context.Context, consumer, source, id string) error
	// RetryOnKey returns the identity currently retrying on a key
	// (one whose attempts are counted and that has not settled since).
	RetryOnKey(ctx context.Context, consumer, key string) (r RetryRow, found bool, err error)
	// ParkedRehold puts one parked message back as held until the given time
	// (a released message that failed transiently waits out its backoff).
	// detail replaces the parked row's detail, so that the stuck-keys view
	// says why it waits now.
	ParkedRehold(ctx context.Context, seq int64, until time.Time, detail string) error

	// DeadLetterInsert stores the original envelope with the reason.
	DeadLetterInsert(ctx context.Context, d DeadLetter) (int64, error)
	// DeadLetterResolve marks one open DLQ row redriven or skipped.
	// state is how it was resolved; resolution says it in words (who, why,
	// what came of a redrive).
	DeadLetterResolve(ctx context.Context, consumer string, seq int64, state DeadLetterState, resolution string, at time.Time) error
	// DecisionGet reads the decision recorded for an identity.
	DecisionGet(ctx context.Context, consumer, source, id string) ([]byte, error)
	// DecisionRecord stores a decision for an identity inside the batch.
	DecisionRecord(ctx context.Context, consumer, source, id string, decision []byte, at time.Time) error
	// AuditInsert records a non-applied outcome. A duplicate is counted on its
	// inbox row rather than added as a row, and a collision is recorded
	// once per colliding payload: delivering again what was already
	// recorded adds no row (DESIGN §7).
	AuditInsert(ctx context.Context, a AuditRow) error
	// GapInsert records a known gap in a key's version history.
	GapInsert(ctx context.Context, g Gap) error

	// Batch-shaped methods: one statement (or a few, in bounded chunks)
	// for many rows.

	// KeyLockMany reads and locks the ordering state of the keys that exist,
	// in key order (so concurrent batches lock in one order), with HasParked
	// and HasRetries read under the locks. Keys never seen are absent.
	KeyLockMany(ctx context.Context, consumer string, keys []string) (map[string]KeyState, error)
	// KeyEnsureMany creates the key rows that do not exist, with no version.
	KeyEnsureMany(ctx context.Context, consumer string, keys []string, at time.Time) error
	// InboxInsertMany inserts identities; inserted[i] is false when rows[i]
	// already existed (the primary key decided). rows must not repeat an
	// identity.
	InboxInsertMany(ctx context.Context, rows []InboxRow) (inserted []bool, err error)
	// InboxSetOutcomeMany records the outcome of many identities.
	InboxSetOutcomeMany(ctx context.Context, consumer string, rows []OutcomeRow) error
	// KeyAdvanceMany runs the compare-and-set of each move and reports how
	// many won; every move names a different key.
	KeyAdvanceMany(ctx context.Context, consumer string, moves []KeyMove, at time.Time) (int, error)
	// RetryClearMany forgets the attempts of many identities.
	RetryClearMany(ctx context.Context, consumer string, ids []Identity) error

	Commit() error
	Rollback() error
}

// Identity names one message for a consumer: its CloudEvents source and
// id.
type Identity struct{ Source, ID string }

// OutcomeRow is the outcome an identity ended in (Tx.InboxSetOutcomeMany).
type OutcomeRow struct {
	Identity
	Outcome     string
	ProcessedAt *time.Time
}

// KeyMove is one compare-and-set of a key version, from Prev (nil: no
// version yet) to Next.
type KeyMove struct {
	Key  string
	Prev *int64
	Next int64
}

// InboxRow is one identity a consumer accepted.
type InboxRow struct {
	Consumer, Source, ID string
	PayloadHash          string
	BusinessKey          string
	EventType            string
	Tenant               string
	ContractVersion      string
	PartitionKey         string
	ObjectVersion        *int64
	Outcome              string
	ReceivedAt           time.Time
	ProcessedAt          *time.Time
	ResultReference      string
	RetentionUntil       time.Time
}

// KeyState is the ordering state of one business object for one consumer.
type KeyState struct {
	Consumer, Key string
	// Version is the last committed object version (nil: none yet).
	Version *int64
	Blocked bool
	// BlockedSource and BlockedID name the message the key is blocked
	// behind (empty for a gap block).
	BlockedSource, BlockedID string
	BlockedReason            string
	BlockedSince             time.Time
	UpdatedAt                time.Time
	// HasParked and HasRetries say whether any message of the key is
	// parked, or has failed attempts recorded, as Tx.Key read them under
	// the key's lock (other queries leave them false). The pipeline skips
	// the drain and the retry checks of a key that has neither.
	HasParked, HasRetries bool
}

// Parked is a message stored in the database instead of the broker.
type Parked struct {
	Seq                  int64
	Consumer, Source, ID string
	PartitionKey         string
	ObjectVersion        *int64
	Reason               string
	Detail               string
	Envelope             []byte
	PayloadHash          string
	ParkedAt             time.Time
	// HoldUntil is the hold deadline of a held message (zero otherwise).
	HoldUntil time.Time
}

// RetryRow is one failed attempt of an identity.
type RetryRow struct {
	Consumer, Source, ID string
	PartitionKey         string
	Error                string
	At                   time.Time
}

// DeadLetter is a message the pipeline gave up on, byte for byte.
type DeadLetter struct {
	Seq                  int64
	Consumer, Source, ID string
	PartitionKey         string
	ObjectVersion        *int64
	PayloadHash          string
	Envelope             []byte
	Reason               string
	Attempts             int
	FirstError           string
	LastError            string
	DeadAt               time.Time
	// State is open until an operator resolves the row; Resolution says
	// how in words.
	State      DeadLetterState
	Resolution string
	ResolvedAt *time.Time
}

// AuditRow is the evidence of one non-applied outcome.
type AuditRow struct {
	Seq                  int64
	Consumer, Source, ID string
	PartitionKey         string
	ReceivedVersion      *int64
	CurrentVersion       *int64
	Outcome              string
	Reason               string
	NextAction           string
	At                   time.Time
	// PayloadHash, set for duplicates and collisions, makes the row
	// once-only: the same payload seen again under that identity adds no
	// row.
	PayloadHash string
}

// Gap is a recorded decision to move past missing versions of a key.
type Gap struct {
	Consumer, Key string
	// FromVersion and ToVersion bound the missing range, inclusive.
	FromVersion, ToVersion int64
	DecidedBy              string
	Reason                 string
	At                     time.Time
}

// Operator holds the queries that run outside the pipeline: what an
// operator, the sweeper or retention needs.
type Operator interface {
	// DeadLetterList lists a consumer's DLQ, oldest first; resolved rows only
	// when all is true.
	DeadLetterList(ctx context.Context, consumer string, all bool) ([]DeadLetter, error)
	// DeadLetterGet reads one DLQ row by its sequence number.
	DeadLetterGet(ctx context.Context, consumer string, seq int64) (DeadLetter, error)
	// KeyViewList lists key views; only blocked or holding keys when stuck is true.
	KeyViewList(ctx context.Context, consumer string, stuck bool) ([]KeyView, error)
	// KeyViewGet returns one key view.
	KeyViewGet(ctx context.Context, consumer, key string) (KeyView, error)
	// ParkedList lists the parked messages of a key, every reason.
	ParkedList(ctx context.Context, consumer, key string) ([]Parked, error)
	// AuditList lists audit rows for a consumer (and key, when not empty),
	// newest last, at most limit.
	AuditList(ctx context.Context, consumer, key string, limit int) ([]AuditRow, error)
	// GapList lists the recorded gaps of a key.
	GapList(ctx context.Context, consumer, key string) ([]Gap, error)
	// Counts reports row counts for a consumer.
	Counts(ctx context.Context, consumer string) (Counts, error)
	// ParkedListDue lists held messages whose hold deadline is at or before now,
	// one per key (the lowest version).
	ParkedListDue(ctx context.Context, consumer string, now time.Time) ([]Parked, error)
	// KeyListBlockedBefore lists keys blocked since before the given time.
	KeyListBlockedBefore(ctx context.Context, consumer string, before time.Time) ([]KeyState, error)
	// InboxSeen reports the recorded outcome and payload hash of an identity,
	// without locking: a fast path before expensive work, never the arbiter.
	InboxSeen(ctx context.Context, consumer, source, id string) (outcome, hash string, found bool, err error)
	// KeyVersion reads a key's committed version (nil: none), unlocked.
	KeyVersion(ctx context.Context, consumer, key string) (*int64, error)
	// DecisionGet reads the decision recorded for an identity; ErrNotFound
	// when none.
	DecisionGet(ctx context.Context, consumer, source, id string) ([]byte, error)
	// DecisionRecord stores a decision unless one is already recorded, and
	// returns the recorded one: concurrent deciders converge on the first.
	DecisionRecord(ctx context.Context, consumer, source, id string, decision []byte, at time.Time) ([]byte, error)
	// DecisionClaim claims the right to decide an identity until until,
	// for owner: true when no other owner holds an unexpired claim. The
	// claim is released by ReleaseDecision, or runs out. held is when the
	// claim in force (owner's, or the other one's) runs out.
	DecisionClaim(ctx context.Context, consumer, source, id, owner string, now, until time.Time) (claimed bool, held time.Time, err error)
	// DecisionUnclaim drops owner's claim on an identity.
	DecisionUnclaim(ctx context.Context, consumer, source, id, owner string) error
	// InboxPurge deletes at most batch inbox identities whose retention
	// ended before now, and reports how many it deleted.
	InboxPurge(ctx context.Context, consumer string, now time.Time, batch int) (int64, error)
}

// KeyView is a key's state together with what is parked behind it.
type KeyView struct {
	KeyState
	Held, BlockedCount, Parked int
	// OldestParked is when the oldest held or blocked message was parked.
	OldestParked time.Time
	// NextVersion is the lowest parked version (nil when none).
	NextVersion *int64
}

// Counts are a consumer's row counts.
type Counts struct {
	InboxRows, Applied, Parked, Held, Blocked, DeadLetters, Keys int64
	// BlockedKeys counts keys blocked behind a failed message or a gap.
	BlockedKeys int64
	// Gaps counts recorded gap decisions.
	Gaps int64
	// OldestStuck is when the oldest held or blocked message was parked
	// (zero when none).
	OldestStuck time.Time
}
