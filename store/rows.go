package store

import (
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Identity names one message for a consumer: its CloudEvents source and
// id.
type Identity struct{ Source, ID string }

// OutcomeRow is the outcome an identity ended in (Executor.InboxSetOutcomeMany).
type OutcomeRow struct {
	Identity
	Outcome     seqboxtype.Outcome
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
	Outcome              seqboxtype.Outcome
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
	// Baseline is the first version the key committed or passed over,
	// kept from then on (nil: none yet, or committed before seqbox kept
	// it).
	Baseline *int64
	Blocked  bool
	// BlockedSource and BlockedID name the message the key is blocked
	// behind (empty for a gap block).
	BlockedSource, BlockedID string
	BlockedReason            string
	BlockedSince             time.Time
	UpdatedAt                time.Time
	// HasParked and HasRetries say whether any message of the key is
	// parked, or has failed attempts recorded, as Tx.Key read them under
	// the key's lock (other queries leave them false). The pipeline skips
	// the unparking and the retry checks of a key that has neither.
	HasParked, HasRetries bool
}

// Parked is a message stored in the database instead of the broker.
type Parked struct {
	Seq                  int64
	Consumer, Source, ID string
	PartitionKey         string
	ObjectVersion        *int64
	Reason               seqboxtype.Park
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
	// PayloadHash is the hash of the copy its turn is bound to (RetryOnKey
	// only; "" when none is).
	PayloadHash string
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
	State      seqboxtype.DeadLetter
	Resolution string
	ResolvedAt *time.Time
	// Redrives counts the redrives after which the message failed again
	// and came back to this row, which keeps its number; History says
	// each, oldest first (read only: DeadLetterInsert writes them).
	Redrives int
	History  []string
}

// AuditRow is the evidence of one non-applied outcome.
type AuditRow struct {
	Seq                  int64
	Consumer, Source, ID string
	PartitionKey         string
	ReceivedVersion      *int64
	CurrentVersion       *int64
	Outcome              seqboxtype.Outcome
	Reason               string
	NextAction           string
	At                   time.Time
	// PayloadHash, set for duplicates and collisions, makes the row
	// once-only: the same payload seen again under that identity adds no
	// row.
	PayloadHash string
}

// Gap is the record of moving past missing versions of a key.
type Gap struct {
	Consumer, Key string
	// FromVersion and ToVersion bound the missing range, inclusive.
	FromVersion, ToVersion int64
	DecidedBy              string
	Reason                 string
	At                     time.Time
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
	// Gaps counts recorded gaps.
	Gaps int64
	// OldestStuck is when the longest-stuck key got stuck: the earliest of
	// the blocked keys' BlockedSince and the held or blocked messages'
	// ParkedAt (zero when none), the oldest Since of the stuck keys'
	// reports.
	OldestStuck time.Time
}
