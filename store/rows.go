package store

import (
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Identity names one message for a consumer: its CloudEvents source and
// id.
type Identity struct {
	// Source and ID are the message's source and id attributes.
	Source, ID string
}

// OutcomeRow is the outcome an identity ended in (Executor.InboxSetOutcomeMany).
type OutcomeRow struct {
	Identity
	// Outcome is the outcome recorded, as InboxSetOutcomeParams.Outcome.
	Outcome seqboxtype.Outcome
	// ProcessedAt is when the outcome was reached (nil: not processed).
	ProcessedAt *time.Time
	// ResultReference is as InboxSetOutcomeParams.ResultReference.
	ResultReference string
}

// KeyMove is one compare-and-set of a key version, from Prev (nil: no
// version yet) to Next.
type KeyMove struct {
	// Key is the partition key.
	Key string
	// Prev is the version it must hold for the move to win (nil: none).
	Prev *int64
	// Next is the version it moves to.
	Next int64
}

// InboxRow is one identity a consumer accepted.
type InboxRow struct {
	// Consumer, Source and ID are the identity. A rejected envelope's is
	// an empty source and "sha256:" with the hex SHA-256 of its bytes.
	Consumer, Source, ID string
	// PayloadHash is the payload hash of the copy recorded
	// (seqboxtype.Event.Hash; a rejected envelope's: the hex SHA-256 of
	// its bytes).
	PayloadHash string
	// BusinessKey is the event's businesskey ("" for none).
	BusinessKey string
	// EventType is the event's type.
	EventType string
	// Tenant is the event's tenantid ("" for none).
	Tenant string
	// ContractVersion is the event's dataschema ("" for none).
	ContractVersion string
	// CausationID is the event's causationid ("" for none).
	CausationID string
	// PartitionKey is the event's partitionkey ("" for none).
	PartitionKey string
	// ObjectVersion is the event's objectversion (nil for none).
	ObjectVersion *int64
	// Outcome is the outcome the identity ended in ("" while its delivery
	// has not reached one).
	Outcome seqboxtype.Outcome
	// ReceivedAt is when the identity was recorded.
	ReceivedAt time.Time
	// ProcessedAt is when the outcome was reached; nil when the pipeline
	// did not record it (it does for applied and rejected).
	ProcessedAt *time.Time
	// ResultReference is stored and read back as given; seqbox's own
	// pipeline leaves it empty.
	ResultReference string
	// RetentionUntil is when retention may purge the identity: ReceivedAt
	// plus the consumer's Retention.
	RetentionUntil time.Time
}

// KeyState is the ordering state of one business object for one consumer.
type KeyState struct {
	// Consumer names the consumer, Key the partition key.
	Consumer, Key string
	// Version is the last committed object version (nil: none yet).
	Version *int64
	// Baseline is the first version the key committed or passed over,
	// kept from then on (nil: none yet, or committed before seqbox kept
	// it).
	Baseline *int64
	// Blocked says the key is blocked: its later versions park as
	// blocked.
	Blocked bool
	// BlockedSource and BlockedID name the message the key is blocked
	// behind (empty for a gap block).
	BlockedSource, BlockedID string
	// BlockedReason says why it is blocked, in words ("" when not
	// blocked).
	BlockedReason string
	// BlockedSince is when it was blocked (zero when not blocked).
	BlockedSince time.Time
	// UpdatedAt is when the row last changed: created, advanced, blocked
	// or unblocked.
	UpdatedAt time.Time
	// HasParked and HasRetries say whether any message of the key is
	// parked, or has failed attempts recorded, as Tx.Key read them under
	// the key's lock (other queries leave them false). The pipeline skips
	// the unparking and the retry checks of a key that has neither.
	HasParked, HasRetries bool
}

// Parked is a message stored in the database instead of the broker.
type Parked struct {
	// Seq is the row's sequence number, in the order rows were parked.
	Seq int64
	// Consumer, Source and ID are the message's identity.
	Consumer, Source, ID string
	// PartitionKey is the key it is parked on.
	PartitionKey string
	// ObjectVersion is its objectversion (nil for none).
	ObjectVersion *int64
	// Reason is why it is parked: held, blocked, collision or
	// version_conflict.
	Reason seqboxtype.Park
	// Detail says why in words, as the stuck-keys view shows it.
	Detail string
	// Envelope is the message as received, byte for byte.
	Envelope []byte
	// PayloadHash is the message's payload hash.
	PayloadHash string
	// ParkedAt is when it was parked.
	ParkedAt time.Time
	// HoldUntil is the hold deadline of a held message (zero otherwise).
	HoldUntil time.Time
}

// RetryRow is one failed attempt of an identity.
type RetryRow struct {
	// Consumer, Source and ID are the identity.
	Consumer, Source, ID string
	// PartitionKey is the key whose turn the row holds ("" for an unkeyed
	// message).
	PartitionKey string
	// Error is the failed attempt's error; read back, the latest one (""
	// for a turn with no failure yet).
	Error string
	// At is when the attempt failed; read back, when the identity was
	// last seen: its latest failure or turn taken.
	At time.Time
	// PayloadHash is the hash of the copy its turn is bound to (RetryOnKey
	// only; "" when none is).
	PayloadHash string
	// BusinessKey is the business key its turn reserves ("" for none),
	// read back by RetryOnKey and TurnListStale.
	BusinessKey string
}

// OpenCall is a call of the effects ledger that is pending or uncertain.
type OpenCall struct {
	// IdempotencyKey is the call's key, State its state (pending or
	// uncertain).
	IdempotencyKey, State string
}

// DeadLetter is a message the pipeline gave up on, byte for byte.
type DeadLetter struct {
	// Seq is the row's sequence number, kept across redrives that fail
	// again.
	Seq int64
	// Consumer, Source and ID are the identity (source and id empty, or
	// what could be read of them, for a rejected envelope).
	Consumer, Source, ID string
	// PartitionKey is the message's partitionkey ("" for none).
	PartitionKey string
	// ObjectVersion is its objectversion (nil for none, or unread).
	ObjectVersion *int64
	// PayloadHash is its payload hash (a rejected envelope's: the hex
	// SHA-256 of its bytes).
	PayloadHash string
	// Envelope is the message as received, byte for byte (empty for a turn
	// ended without it, whose envelope never reached the store).
	Envelope []byte
	// Reason is why it was dead-lettered, the latest failure's.
	Reason string
	// Attempts counts the failed delivery attempts, added up over the
	// redrives that failed again.
	Attempts int
	// FirstError is the first failed attempt's error.
	FirstError string
	// LastError is the latest failed attempt's error.
	LastError string
	// DeadAt is when it was dead-lettered, the latest time.
	DeadAt time.Time
	// State is open until an operator resolves the row; Resolution says
	// how in words.
	State seqboxtype.DeadLetter
	// Resolution says how the row was resolved: who, why, what came of a
	// redrive ("" while open).
	Resolution string
	// ResolvedAt is when it was resolved (nil while open).
	ResolvedAt *time.Time
	// Redrives counts the redrives after which the message failed again
	// and came back to this row, which keeps its number; History says
	// each, oldest first (read only: DeadLetterInsert writes them).
	Redrives int
	// History is one line per such failure, oldest first.
	History []string
}

// AuditRow is the evidence of one non-applied outcome.
type AuditRow struct {
	// Seq is the row's sequence number, in the order rows were written.
	Seq int64
	// Consumer, Source and ID are the identity.
	Consumer, Source, ID string
	// PartitionKey is the event's partitionkey ("" for none).
	PartitionKey string
	// ReceivedVersion is the event's objectversion (nil for none).
	ReceivedVersion *int64
	// CurrentVersion is the key's committed version when the outcome was
	// reached (nil: none, or not known there).
	CurrentVersion *int64
	// Outcome is the outcome reached, never applied (AuditInsert counts
	// a duplicate on its inbox row instead of adding a row).
	Outcome seqboxtype.Outcome
	// Reason is the result's reason.
	Reason string
	// NextAction says what happens next, or what an operator should do
	// ("none", "investigate: ...").
	NextAction string
	// At is when the outcome was reached.
	At time.Time
	// PayloadHash, set for duplicates and collisions, makes the row
	// once-only: the same payload seen again under that identity adds no
	// row.
	PayloadHash string
}

// Gap is the record of moving past missing versions of a key.
type Gap struct {
	// Consumer names the consumer, Key the partition key.
	Consumer, Key string
	// FromVersion and ToVersion bound the missing range, inclusive.
	FromVersion, ToVersion int64
	// DecidedBy is who passed over the range: an operator's name, or what
	// did it by itself ("gap_policy=advance", "max_block", "pipeline").
	DecidedBy string
	// Reason says why, in words.
	Reason string
	// At is when the gap was recorded.
	At time.Time
}

// KeyView is a key's state together with what is parked behind it.
type KeyView struct {
	KeyState
	// Held and BlockedCount count the key's messages parked as held and
	// as blocked; Parked counts all its parked messages, every reason.
	Held, BlockedCount, Parked int
	// OldestParked is when the oldest held or blocked message was parked.
	OldestParked time.Time
	// NextVersion is the lowest parked version (nil when none).
	NextVersion *int64
}

// Counts are a consumer's row counts.
type Counts struct {
	// InboxRows counts the identities in the inbox (rejected envelopes'
	// left out), Applied those applied; Parked counts the parked messages
	// (every reason), Held and Blocked those held and blocked; DeadLetters
	// counts the open DLQ rows, and Keys the keys.
	InboxRows, Applied, Parked, Held, Blocked, DeadLetters, Keys int64
	// BlockedKeys counts keys blocked behind a failed message or a gap.
	BlockedKeys int64
	// Gaps counts recorded gaps.
	Gaps int64
	// RetryingKeys counts the keys with a message whose failed attempts
	// are recorded and that waits to be tried again (a key's turn with no
	// attempt counted, taken to decide, is not one).
	RetryingKeys int64
	// OldestStuck is when the longest-stuck key got stuck: the earliest of
	// the blocked keys' BlockedSince and the held or blocked messages'
	// ParkedAt (zero when none), the oldest Since of the stuck keys'
	// reports.
	OldestStuck time.Time
}
