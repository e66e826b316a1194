package store

import (
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// MessageRef names one message for a consumer: its CloudEvents source and
// id.
type MessageRef struct {
	Consumer, Source, ID string
}

// KeyRef names one business object (partition key) of a consumer.
type KeyRef struct {
	Consumer, Key string
}

// DeadLetterRef names one DLQ row of a consumer.
type DeadLetterRef struct {
	Consumer string
	Seq      int64
}

// Seen is what the inbox recorded of an identity (Executor.InboxSeen).
type Seen struct {
	Outcome     seqboxtype.Outcome
	PayloadHash string
}

// DecisionLook is what a decider looks at right before it asks
// (Executor.DecisionLook), read in one statement.
type DecisionLook struct {
	// Decided: a decision is recorded for the identity.
	Decided bool
	// Seen: the inbox holds the identity, with Outcome.
	Seen    bool
	Outcome seqboxtype.Outcome
	// TurnHeld: the identity has a retry row (its key's turn, or a
	// counted failure).
	TurnHeld bool
}

// RetryCount is an identity's failed attempts so far (Executor.RetryRecord).
type RetryCount struct {
	Attempts int
	// FirstError is the error of the first attempt.
	FirstError string
}

// DecisionClaim is the result of Executor.DecisionClaim.
type DecisionClaim struct {
	// Claimed: the caller holds the claim now.
	Claimed bool
	// Until is when the claim in force (the caller's, or another owner's)
	// runs out.
	Until time.Time
}

// InboxSetOutcomeParams are Executor.InboxSetOutcome's.
type InboxSetOutcomeParams struct {
	Consumer, Source, ID string
	Outcome              seqboxtype.Outcome
	// ProcessedAt is when the outcome was reached (nil: not processed).
	ProcessedAt *time.Time
}

// InboxSetOutcomeManyParams are Executor.InboxSetOutcomeMany's.
type InboxSetOutcomeManyParams struct {
	Consumer string
	Rows     []OutcomeRow
}

// InboxPurgeParams are Executor.InboxPurge's.
type InboxPurgeParams struct {
	Consumer string
	// Now: identities whose retention ended before it go.
	Now time.Time
	// Limit bounds the rows one call deletes.
	Limit int
	// From, when set, skips identities whose retention ended before it:
	// a purge of many batches passes the previous batch's
	// InboxPurgeResult.Last, so that each batch starts where the last one
	// ended instead of at the oldest identity. On PostgreSQL the index
	// entries of the rows earlier batches deleted stay until VACUUM, and
	// a batch that started at the oldest walked all of them again: at 3
	// million deleted, 400 ms and 8,755 index pages a batch of 500
	// (docs/benchmarks-history.md §20).
	From time.Time
}

// InboxPurgeResult is what one Executor.InboxPurge call removed.
type InboxPurgeResult struct {
	// Removed is how many identities it deleted.
	Removed int64
	// Last is the latest retention end among them (the zero time when it
	// deleted none): the next batch's InboxPurgeParams.From.
	Last time.Time
}

// BusinessKeyClaimParams are Executor.BusinessKeyClaim's.
type BusinessKeyClaimParams struct {
	Consumer, BusinessKey string
	// Source and ID name the message that claims it.
	Source, ID string
	At         time.Time
}

// KeyLockManyParams are Executor.KeyLockMany's.
type KeyLockManyParams struct {
	Consumer string
	Keys     []string
}

// KeysRef names keys of a consumer.
type KeysRef struct {
	Consumer string
	Keys     []string
}

// KeyEnsureParams are Executor.KeyEnsure's.
type KeyEnsureParams struct {
	Consumer, Key string
	At            time.Time
}

// KeyEnsureManyParams are Executor.KeyEnsureMany's.
type KeyEnsureManyParams struct {
	Consumer string
	Keys     []string
	At       time.Time
}

// KeyAdvanceParams are Executor.KeyAdvance's: the compare-and-set of a key
// version from Prev (nil: no version yet) to Next.
type KeyAdvanceParams struct {
	Consumer, Key string
	Prev          *int64
	Next          int64
	At            time.Time
}

// KeyAdvanceManyParams are Executor.KeyAdvanceMany's.
type KeyAdvanceManyParams struct {
	Consumer string
	Moves    []KeyMove
	At       time.Time
}

// KeyBlockParams are Executor.KeyBlock's.
type KeyBlockParams struct {
	Consumer, Key string
	// Source and ID name the message the key is blocked behind (empty for
	// a gap).
	Source, ID string
	Reason     string
	At         time.Time
}

// KeyUnblockParams are Executor.KeyUnblock's.
type KeyUnblockParams struct {
	Consumer, Key string
	At            time.Time
}

// KeyViewListParams are Executor.KeyViewList's.
type KeyViewListParams struct {
	Consumer string
	// Stuck lists only blocked keys and keys holding messages.
	Stuck bool
}

// KeyListBlockedBeforeParams are Executor.KeyListBlockedBefore's.
type KeyListBlockedBeforeParams struct {
	Consumer string
	Before   time.Time
}

// TurnListStaleParams are Executor.TurnListStale's.
type TurnListStaleParams struct {
	Consumer string
	Before   time.Time
	Limit    int
}

// ParkedListDueParams are Executor.ParkedListDue's.
type ParkedListDueParams struct {
	Consumer string
	Now      time.Time
}

// ParkedSetReasonParams are Executor.ParkedSetReason's.
type ParkedSetReasonParams struct {
	Consumer, Key string
	From, To      seqboxtype.Park
	// HoldUntil is the new hold deadline (zero: none).
	HoldUntil time.Time
}

// ParkedStartHoldsParams are Executor.ParkedStartHolds's.
type ParkedStartHoldsParams struct {
	Consumer, Key string
	Until         time.Time
	// Now, when set, also starts over the holds that ran out by Now.
	Now time.Time
}

// ParkedReholdParams are Executor.ParkedRehold's.
type ParkedReholdParams struct {
	Seq    int64
	Until  time.Time
	Detail string
}

// IdentitiesRef names many identities of one consumer.
type IdentitiesRef struct {
	Consumer string
	IDs      []Identity
}

// InboxGetManyParams are Executor.InboxGetMany's.
type InboxGetManyParams struct {
	Consumer string
	IDs      []Identity
}

// RetryClearManyParams are Executor.RetryClearMany's.
type RetryClearManyParams struct {
	Consumer string
	IDs      []Identity
}

// DeadLetterListParams are Executor.DeadLetterList's.
type DeadLetterListParams struct {
	Consumer string
	// All lists resolved rows too.
	All bool
}

// DeadLetterResolveParams are Executor.DeadLetterResolve's.
type DeadLetterResolveParams struct {
	Consumer string
	Seq      int64
	// State is how the row was resolved: redriven, redrive_failed or
	// skipped.
	State seqboxtype.DeadLetter
	// Resolution says it in words: who, why, what came of a redrive.
	Resolution string
	At         time.Time
}

// AuditListParams are Executor.AuditList's.
type AuditListParams struct {
	Consumer string
	// Key, when not empty, lists that key's rows only.
	Key   string
	Limit int
}

// DecisionRecordParams are Executor.DecisionRecord's.
type DecisionRecordParams struct {
	Consumer, Source, ID string
	// Decision is the agent's output, as its Decider returned it.
	Decision []byte
	// PayloadHash is the hash of the copy the decision was made for.
	PayloadHash string
	At          time.Time
	// Owner, when set, is the claim the decision was made under: it is
	// dropped in the same commit as the record.
	Owner string
	// Effect, when set, is the result of the effects ledger's call the
	// decision was made from (its Calls set): it is recorded in the same
	// commit, so that an event's decision costs one write after its call,
	// not two. Both are recorded, or neither: when the row is no longer
	// that call's (an operator resolved it meanwhile), nothing is, and
	// the error is ErrEffectChanged.
	Effect *EffectRecordParams
}

// Decision is an agent decision recorded under an identity.
type Decision struct {
	// Value is the agent's output, as its Decider returned it.
	Value []byte
	// PayloadHash is the hash of the copy it was made for ("" for a
	// decision recorded before decisions carried one).
	PayloadHash string
}

// MadeFor reports whether the decision belongs to a copy with this
// payload hash.
func (d Decision) MadeFor(hash string) bool { return d.PayloadHash == "" || d.PayloadHash == hash }

// DecisionClaimParams are Executor.DecisionClaim's.
type DecisionClaimParams struct {
	Consumer, Source, ID string
	Owner                string
	Now, Until           time.Time
}

// TurnTakeParams are Executor.TurnTake's.
type TurnTakeParams struct {
	Consumer, Source, ID string
	// PartitionKey is the key whose turn it takes ("" for an unkeyed
	// message, whose row only reserves its business key).
	PartitionKey string
	// BusinessKey is the effect the message asks for ("" for none).
	BusinessKey string
	// PayloadHash is the hash of the copy taking the turn.
	PayloadHash string
	At          time.Time
}

// TurnTakeManyParams are Executor.TurnTakeMany's: turns of messages
// without a business key, all taken At.
type TurnTakeManyParams struct {
	Consumer string
	At       time.Time
	Turns    []TurnRow
}

// TurnRow is one turn of TurnTakeMany.
type TurnRow struct {
	Source, ID   string
	PartitionKey string
	PayloadHash  string
}

// DecisionClaimManyParams are Executor.DecisionClaimMany's: claims of
// many identities for one owner.
type DecisionClaimManyParams struct {
	Consumer   string
	IDs        []Identity
	Owner      string
	Now, Until time.Time
}

// GapCoversParams are Executor.GapCovers's.
type GapCoversParams struct {
	Consumer, Key string
	Version       int64
}

// BusinessKeyRef names a business key asked for by one identity: the
// identity itself is left out of Executor.BusinessKeyInFlight's answer.
type BusinessKeyRef struct {
	Consumer, BusinessKey, Source, ID string
}

// DecisionUnclaimParams are Executor.DecisionUnclaim's.
type DecisionUnclaimParams struct {
	Consumer, Source, ID string
	Owner                string
}

// ConsumerHeartbeatParams are Executor.ConsumerHeartbeat's.
type ConsumerHeartbeatParams struct {
	Consumer string
	At       time.Time
}

// RequestClaimParams are Executor.RequestClaim's.
type RequestClaimParams struct {
	Seq   int64
	Taker string
	At    time.Time
}

// RequestFinishParams are Executor.RequestFinish's.
type RequestFinishParams struct {
	Seq   int64
	State seqboxtype.Request
	// Result is the JSON of what the messages reached.
	Result []byte
	Error  string
	At     time.Time
}

// RequestCancelParams are Executor.RequestCancel's.
type RequestCancelParams struct {
	Seq int64
	Why string
	At  time.Time
}
