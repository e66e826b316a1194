package store

import (
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// MessageRef names one message for a consumer: its CloudEvents source and
// id.
type MessageRef struct {
	// Consumer, Source and ID are the identity: the consumer's name and
	// the message's source and id.
	Consumer, Source, ID string
}

// KeyRef names one business object (partition key) of a consumer.
type KeyRef struct {
	// Consumer names the consumer and Key the partition key (ParkedList
	// and GapList: "" for every key).
	Consumer, Key string
}

// DeadLetterRef names one DLQ row of a consumer.
type DeadLetterRef struct {
	// Consumer is the consumer whose DLQ holds the row.
	Consumer string
	// Seq is the row's sequence number.
	Seq int64
}

// Seen is what the inbox recorded of an identity (Executor.InboxSeen).
type Seen struct {
	// Outcome is the outcome recorded ("" when its delivery has not
	// reached one yet).
	Outcome seqboxtype.Outcome
	// PayloadHash is the payload hash of the copy recorded.
	PayloadHash string
}

// DecisionLook is what a decider looks at right before it asks
// (Executor.DecisionLook), read in one statement.
type DecisionLook struct {
	// Decided: a decision is recorded for the identity.
	Decided bool
	// Seen: the inbox holds the identity, with Outcome.
	Seen bool
	// Outcome is the inbox's outcome for the identity ("" when not Seen,
	// or when its delivery has not reached one yet).
	Outcome seqboxtype.Outcome
	// TurnHeld: the identity has a retry row (its key's turn, or a
	// counted failure).
	TurnHeld bool
}

// RetryCount is an identity's failed attempts so far (Executor.RetryRecord).
type RetryCount struct {
	// Attempts is how many failed attempts the identity has counted, the
	// one just recorded included.
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
	// Consumer, Source and ID name the identity.
	Consumer, Source, ID string
	// Outcome is the outcome recorded ("" for none yet: the delivery
	// stopped before it reached one).
	Outcome seqboxtype.Outcome
	// ProcessedAt is when the outcome was reached (nil: not processed).
	ProcessedAt *time.Time
	// ResultReference, when not empty, is recorded as what the handler's
	// effect produced (seqbox.SetResultReference); empty leaves the
	// recorded one as it is.
	ResultReference string
}

// InboxSetOutcomeManyParams are Executor.InboxSetOutcomeMany's.
type InboxSetOutcomeManyParams struct {
	// Consumer is the consumer whose identities they are.
	Consumer string
	// Rows are the identities and their outcomes.
	Rows []OutcomeRow
}

// InboxPurgeParams are Executor.InboxPurge's.
type InboxPurgeParams struct {
	// Consumer is the consumer whose identities go.
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
	// Consumer claims BusinessKey, the effect an event asks for.
	Consumer, BusinessKey string
	// Source and ID name the message that claims it.
	Source, ID string
	// At is when the message applies it.
	At time.Time
}

// KeyLockManyParams are Executor.KeyLockMany's.
type KeyLockManyParams struct {
	// Consumer is the consumer whose keys they are.
	Consumer string
	// Keys are the partition keys to lock, in any order (a key repeated
	// counts once).
	Keys []string
}

// KeysRef names keys of a consumer.
type KeysRef struct {
	// Consumer is the consumer whose keys they are.
	Consumer string
	// Keys are the partition keys.
	Keys []string
}

// KeyEnsureParams are Executor.KeyEnsure's.
type KeyEnsureParams struct {
	// Consumer and Key name the key.
	Consumer, Key string
	// At is a new row's UpdatedAt.
	At time.Time
}

// KeyEnsureManyParams are Executor.KeyEnsureMany's.
type KeyEnsureManyParams struct {
	// Consumer is the consumer whose keys they are.
	Consumer string
	// Keys are the partition keys.
	Keys []string
	// At is the new rows' UpdatedAt.
	At time.Time
}

// KeyAdvanceParams are Executor.KeyAdvance's: the compare-and-set of a key
// version from Prev (nil: no version yet) to Next.
type KeyAdvanceParams struct {
	// Consumer and Key name the key.
	Consumer, Key string
	// Prev is the version the key must hold for the move to win (nil: no
	// version yet).
	Prev *int64
	// Next is the version it moves to, and its baseline when it has none.
	Next int64
	// At is the row's new UpdatedAt.
	At time.Time
}

// KeyAdvanceManyParams are Executor.KeyAdvanceMany's.
type KeyAdvanceManyParams struct {
	// Consumer is the consumer whose keys they are.
	Consumer string
	// Moves are the compare-and-sets, each of a different key.
	Moves []KeyMove
	// At is the moved rows' new UpdatedAt.
	At time.Time
}

// KeyBlockParams are Executor.KeyBlock's.
type KeyBlockParams struct {
	// Consumer and Key name the key.
	Consumer, Key string
	// Source and ID name the message the key is blocked behind (empty for
	// a gap).
	Source, ID string
	// Reason says why, in words (KeyState.BlockedReason).
	Reason string
	// At is when the key is blocked: its BlockedSince and UpdatedAt.
	At time.Time
}

// KeyUnblockParams are Executor.KeyUnblock's.
type KeyUnblockParams struct {
	// Consumer and Key name the key.
	Consumer, Key string
	// At is the row's new UpdatedAt.
	At time.Time
}

// KeyViewListParams are Executor.KeyViewList's.
type KeyViewListParams struct {
	// Consumer is the consumer whose keys are listed.
	Consumer string
	// Stuck lists only blocked keys and keys holding messages.
	Stuck bool
	// Keys, when not empty, lists only these keys (those of them that
	// are stuck, with Stuck); a key with no row is left out.
	Keys []string
}

// KeyNameListParams are Executor.KeyNameList's.
type KeyNameListParams struct {
	// Consumer is the consumer whose keys are named.
	Consumer string
}

// KeyListBlockedBeforeParams are Executor.KeyListBlockedBefore's.
type KeyListBlockedBeforeParams struct {
	// Consumer is the consumer whose keys are listed.
	Consumer string
	// Before: keys blocked since before it are listed.
	Before time.Time
}

// TurnListStaleParams are Executor.TurnListStale's.
type TurnListStaleParams struct {
	// Consumer is the consumer whose turns are listed.
	Consumer string
	// Before: turns last seen before it are listed.
	Before time.Time
	// Limit bounds the rows listed.
	Limit int
}

// ParkedListDueParams are Executor.ParkedListDue's.
type ParkedListDueParams struct {
	// Consumer is the consumer whose held messages are listed.
	Consumer string
	// Now: holds whose deadline is at or before it are due.
	Now time.Time
}

// ParkedSetReasonParams are Executor.ParkedSetReason's.
type ParkedSetReasonParams struct {
	// Consumer and Key name the key whose parked rows move.
	Consumer, Key string
	// From is the reason of the rows that move, To the one they get.
	From, To seqboxtype.Park
	// HoldUntil is the new hold deadline (zero: none).
	HoldUntil time.Time
}

// ParkedStartHoldsParams are Executor.ParkedStartHolds's.
type ParkedStartHoldsParams struct {
	// Consumer and Key name the key whose held messages get a deadline.
	Consumer, Key string
	// Until is the hold deadline they get.
	Until time.Time
	// Now, when set, also starts over the holds that ran out by Now.
	Now time.Time
}

// ParkedReholdParams are Executor.ParkedRehold's.
type ParkedReholdParams struct {
	// Seq names the parked row.
	Seq int64
	// Until is its new hold deadline.
	Until time.Time
	// Detail replaces the row's detail: why it waits now.
	Detail string
}

// IdentitiesRef names many identities of one consumer.
type IdentitiesRef struct {
	// Consumer is the consumer whose identities they are.
	Consumer string
	// IDs are the messages' source and id.
	IDs []Identity
}

// InboxListParams are Executor.InboxList's.
type InboxListParams struct {
	// Consumer is the consumer whose identities are listed.
	Consumer string
	// Tenant, when not empty, keeps the identities whose event's tenantid
	// it is.
	Tenant string
	// CausationID, when not empty, keeps the identities whose event's
	// causationid it is.
	CausationID string
	// DataSchema, when not empty, keeps the identities whose event's
	// dataschema it is.
	DataSchema string
	// Limit is the most rows returned (at least 1).
	Limit int
}

// InboxGetManyParams are Executor.InboxGetMany's.
type InboxGetManyParams struct {
	// Consumer is the consumer whose identities they are.
	Consumer string
	// IDs are the identities to read.
	IDs []Identity
}

// RetryClearManyParams are Executor.RetryClearMany's.
type RetryClearManyParams struct {
	// Consumer is the consumer whose identities they are.
	Consumer string
	// IDs are the identities whose retry rows go.
	IDs []Identity
}

// DeadLetterListParams are Executor.DeadLetterList's.
type DeadLetterListParams struct {
	// Consumer is the consumer whose DLQ is listed.
	Consumer string
	// All lists resolved rows too.
	All bool
	// After keeps the rows whose Seq is greater (0: from the first): the
	// next page starts after the last row of the one before.
	After int64
	// Limit is the most rows returned, in Seq order (0: every row).
	Limit int
	// Of, when set, keeps one identity's rows (by its index).
	Of *Identity
}

// ParkedCollisionListParams are Executor.ParkedCollisionList's.
type ParkedCollisionListParams struct {
	// Consumer is the consumer whose collisions are listed.
	Consumer string
	// Limit is how many at most (required, above zero).
	Limit int
}

// DeadLetterResolveParams are Executor.DeadLetterResolve's.
type DeadLetterResolveParams struct {
	// Consumer is the consumer whose DLQ holds the row.
	Consumer string
	// Seq names the open row.
	Seq int64
	// State is how the row was resolved: redriven, redrive_failed or
	// skipped.
	State seqboxtype.DeadLetter
	// Resolution says it in words: who, why, what came of a redrive.
	Resolution string
	// At is when it was resolved (DeadLetter.ResolvedAt).
	At time.Time
}

// AuditListParams are Executor.AuditList's.
type AuditListParams struct {
	// Consumer is the consumer whose audit is listed.
	Consumer string
	// Key, when not empty, lists that key's rows only.
	Key string
	// Limit bounds the rows: the latest Limit are listed.
	Limit int
}

// DecisionRecordParams are Executor.DecisionRecord's.
type DecisionRecordParams struct {
	// Consumer, Source and ID name the identity decided.
	Consumer, Source, ID string
	// Decision is the agent's output, as its Decider returned it.
	Decision []byte
	// PayloadHash is the hash of the copy the decision was made for.
	PayloadHash string
	// At is when it was decided.
	At time.Time
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
	// Consumer, Source and ID name the identity claimed.
	Consumer, Source, ID string
	// Owner names the claimant: a Consumer, by its process and a random
	// suffix.
	Owner string
	// Now is the time claims are judged at (another owner's that ran out
	// by Now is taken over); Until is when the claim taken or extended
	// runs out.
	Now, Until time.Time
}

// TurnTakeParams are Executor.TurnTake's.
type TurnTakeParams struct {
	// Consumer, Source and ID name the message taking the turn.
	Consumer, Source, ID string
	// PartitionKey is the key whose turn it takes ("" for an unkeyed
	// message, whose row only reserves its business key).
	PartitionKey string
	// BusinessKey is the effect the message asks for ("" for none).
	BusinessKey string
	// PayloadHash is the hash of the copy taking the turn.
	PayloadHash string
	// At is when the turn is taken: the row's last-seen time
	// (RetryRow.At).
	At time.Time
	// Waited counts a delivery of the message that ends in a wait for a
	// call or a decision running elsewhere (the row's waits, TurnWaits):
	// no failure, and no crash.
	Waited bool
}

// TurnTakeManyParams are Executor.TurnTakeMany's: turns of messages
// without a business key, all taken At.
type TurnTakeManyParams struct {
	// Consumer is the consumer whose messages take the turns.
	Consumer string
	// At is when the turns are taken.
	At time.Time
	// Turns are the turns to take (an identity repeated counts once).
	Turns []TurnRow
}

// TurnRow is one turn of TurnTakeMany.
type TurnRow struct {
	// Source and ID name the message taking the turn.
	Source, ID string
	// PartitionKey is the key whose turn it takes.
	PartitionKey string
	// PayloadHash is the hash of the copy taking it.
	PayloadHash string
}

// DecisionClaimManyParams are Executor.DecisionClaimMany's: claims of
// many identities for one owner.
type DecisionClaimManyParams struct {
	// Consumer is the consumer whose identities are claimed.
	Consumer string
	// IDs are the identities to claim (an identity repeated counts once).
	IDs []Identity
	// Owner names the claimant: a Consumer, by its process and a random
	// suffix.
	Owner string
	// Now and Until are as in DecisionClaimParams.
	Now, Until time.Time
}

// GapCoversParams are Executor.GapCovers's.
type GapCoversParams struct {
	// Consumer and Key name the key.
	Consumer, Key string
	// Version is the version asked about.
	Version int64
}

// BusinessKeyRef names a business key asked for by one identity: the
// identity itself is left out of Executor.BusinessKeyInFlight's answer.
type BusinessKeyRef struct {
	// Consumer and BusinessKey name the business key; Source and ID the
	// identity asking.
	Consumer, BusinessKey, Source, ID string
}

// DecisionUnclaimParams are Executor.DecisionUnclaim's.
type DecisionUnclaimParams struct {
	// Consumer, Source and ID name the identity.
	Consumer, Source, ID string
	// Owner is the claimant whose claim is dropped: another's stays.
	Owner string
}

// ConsumerHeartbeatParams are Executor.ConsumerHeartbeat's.
type ConsumerHeartbeatParams struct {
	// Consumer is the registered consumer.
	Consumer string
	// At is its new HeartbeatAt.
	At time.Time
}

// RequestClaimParams are Executor.RequestClaim's.
type RequestClaimParams struct {
	// Seq names the request.
	Seq int64
	// Taker names the consumer process taking it (host:pid): its TakenBy.
	Taker string
	// At is its TakenAt.
	At time.Time
}

// RequestFinishParams are Executor.RequestFinish's.
type RequestFinishParams struct {
	// Seq names the running request.
	Seq int64
	// State is RequestDone or RequestFailed.
	State seqboxtype.Request
	// Result is the JSON of what the messages reached.
	Result []byte
	// Error is why it failed ("" when done).
	Error string
	// At is its DoneAt.
	At time.Time
}

// RequestAliveParams are Executor.RequestAlive's.
type RequestAliveParams struct {
	// Seq names the running request.
	Seq int64
	// Taker names the process that took it (its TakenBy).
	Taker string
	// At is its new AliveAt.
	At time.Time
}

// RequestAbandonParams are Executor.RequestAbandon's.
type RequestAbandonParams struct {
	// Seq names the running request.
	Seq int64
	// AliveAt is its sign of life as the abandoner saw it Silent ago: a
	// request renewed since is left running.
	AliveAt time.Time
	// Silent is how long the abandoner watched it unchanged, for the
	// request's Error.
	Silent time.Duration
	// At is its DoneAt.
	At time.Time
}

// RequestCancelParams are Executor.RequestCancel's.
type RequestCancelParams struct {
	// Seq names the pending request.
	Seq int64
	// Why says why it is withdrawn: the request's Error.
	Why string
	// At is its DoneAt.
	At time.Time
}

// ParkedPageParams are Executor.ParkedPage's.
type ParkedPageParams struct {
	// Consumer and Key name the key (both required).
	Consumer, Key string
	// Reason, when set, lists only the messages parked for it.
	Reason seqboxtype.Park
	// After, when set, starts after this place in the key's order.
	After *ParkedCursor
	// Limit is how many at most (required, above zero).
	Limit int
}

// ParkedCursor is a place in a key's parked messages, which go by
// version (none first) and then by arrival.
type ParkedCursor struct {
	// Version is the message's objectversion, -1 for none.
	Version int64
	// Seq is its row's sequence number.
	Seq int64
}

// ParkedCursorOf is the place of p in its key's parked messages.
func ParkedCursorOf(p Parked) *ParkedCursor {
	c := &ParkedCursor{Version: -1, Seq: p.Seq}
	if p.ObjectVersion != nil {
		c.Version = *p.ObjectVersion
	}
	return c
}
