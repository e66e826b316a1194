package seqbox

import (
	"context"
	"database/sql"

	"github.com/seqbox/seqbox/store"
)

// The driver methods a batch passes straight through to its transaction,
// listed one by one: each was judged not to need the deferred writes
// flushed first. A driver method missing here cannot be called on a
// batch; add it to a group, or write it in batchtx.go with its own
// deferral or flush.

// Prefetch: the batch's identities and keys in a few multi-row
// statements, before any write is deferred.

// KeyLockInsertMany is store.Executor.KeyLockMany then InboxInsertMany: on
// a store that pipelines, one round trip (store.Pipeliner).
// The reads in ahead (nil for none) go in the same round trip, after
// them; ahead has statements only on a store that pipelines.
func (b *batchTx) KeyLockInsertMany(ctx context.Context, p store.KeyLockManyParams, rows []store.InboxRow, ahead *readsAhead) (map[string]store.KeyState, []bool, error) {
	if pl, ok := b.tx.(store.Pipeliner); ok {
		return pl.KeyLockInsertMany(ctx, p, rows, ahead.statements()...)
	}
	keys, err := b.tx.KeyLockMany(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	inserted, err := b.tx.InboxInsertMany(ctx, rows)
	return keys, inserted, err
}

// KeyLockMany is store.Executor.KeyLockMany.
func (b *batchTx) KeyLockMany(ctx context.Context, p store.KeyLockManyParams) (map[string]store.KeyState, error) {
	return b.tx.KeyLockMany(ctx, p)
}

// KeyEnsureMany is store.Executor.KeyEnsureMany.
func (b *batchTx) KeyEnsureMany(ctx context.Context, p store.KeyEnsureManyParams) error {
	return b.tx.KeyEnsureMany(ctx, p)
}

// Rows no deferred write touches: audit, dead letters, gaps, parked
// messages, decisions and the key's turn.

// AuditInsert is store.Executor.AuditInsert.
// In an optimistic run on a store that pipelines, the row (never read
// back in the batch) goes with the handlers' writes.
func (b *batchTx) AuditInsert(ctx context.Context, a store.AuditRow) error {
	if b.queue != nil {
		if _, err := b.queue.add(b.queue.pl.AuditStatement(a)); err != nil {
			return b.rerun(ctx)
		}
		return nil
	}
	return b.tx.AuditInsert(ctx, a)
}

// DeadLetterInsert is store.Executor.DeadLetterInsert.
func (b *batchTx) DeadLetterInsert(ctx context.Context, letter store.DeadLetter) (int64, error) {
	return b.tx.DeadLetterInsert(ctx, letter)
}

// DeadLetterGet is store.Executor.DeadLetterGet.
func (b *batchTx) DeadLetterGet(ctx context.Context, p store.DeadLetterRef) (store.DeadLetter, error) {
	return b.tx.DeadLetterGet(ctx, p)
}

// DeadLetterResolve is store.Executor.DeadLetterResolve.
func (b *batchTx) DeadLetterResolve(ctx context.Context, p store.DeadLetterResolveParams) error {
	return b.tx.DeadLetterResolve(ctx, p)
}

// GapInsert is store.Executor.GapInsert.
func (b *batchTx) GapInsert(ctx context.Context, g store.Gap) error { return b.tx.GapInsert(ctx, g) }

// GapCovers is store.Executor.GapCovers.
func (b *batchTx) GapCovers(ctx context.Context, p store.GapCoversParams) (bool, error) {
	return b.tx.GapCovers(ctx, p)
}

// ParkedDelete is store.Executor.ParkedDelete.
func (b *batchTx) ParkedDelete(ctx context.Context, seq int64) error {
	return b.tx.ParkedDelete(ctx, seq)
}

// ParkedOfIdentity is store.Executor.ParkedOfIdentity.
func (b *batchTx) ParkedOfIdentity(ctx context.Context, p store.MessageRef) ([]store.Parked, error) {
	return b.tx.ParkedOfIdentity(ctx, p)
}

// ParkedListInLine is store.Executor.ParkedListInLine.
func (b *batchTx) ParkedListInLine(ctx context.Context, p store.KeyRef) ([]store.Parked, error) {
	return b.tx.ParkedListInLine(ctx, p)
}

// ParkedRehold is store.Executor.ParkedRehold.
func (b *batchTx) ParkedRehold(ctx context.Context, p store.ParkedReholdParams) error {
	return b.tx.ParkedRehold(ctx, p)
}

// ParkedSetReason is store.Executor.ParkedSetReason.
func (b *batchTx) ParkedSetReason(ctx context.Context, p store.ParkedSetReasonParams) error {
	return b.tx.ParkedSetReason(ctx, p)
}

// ParkedStartHolds is store.Executor.ParkedStartHolds.
func (b *batchTx) ParkedStartHolds(ctx context.Context, p store.ParkedStartHoldsParams) error {
	return b.tx.ParkedStartHolds(ctx, p)
}

// aheadDecision is a decision the prefetch read (aheadDecisions).
type aheadDecision struct {
	d     store.Decision
	found bool
}

// DecisionGet is store.Executor.DecisionGet, answered from the prefetch
// the first time (aheadDecisions): only the decider, outside any
// transaction, records decisions, and a record is never changed.
func (b *batchTx) DecisionGet(ctx context.Context, p store.MessageRef) (store.Decision, error) {
	id := store.Identity{Source: p.Source, ID: p.ID}
	if a, ok := b.aheadDecisions[id]; ok && p.Consumer == b.consumer {
		delete(b.aheadDecisions, id)
		if !a.found {
			return store.Decision{}, store.ErrNotFound
		}
		return a.d, nil
	}
	return b.tx.DecisionGet(ctx, p)
}

// DecisionClaimLive is store.Executor.DecisionClaimLive, read from the
// store: it asks about another decider's claim (a claim this run defers
// is its own message's, taken after the read).
func (b *batchTx) DecisionClaimLive(ctx context.Context, p store.DecisionClaimParams) (bool, error) {
	return b.tx.DecisionClaimLive(ctx, p)
}

// LedgerTouched is store.Executor.LedgerTouched, read from the store:
// the ledger's rows are written outside the run's transactions.
func (b *batchTx) LedgerTouched(ctx context.Context, p store.MessageRef) (bool, error) {
	return b.tx.LedgerTouched(ctx, p)
}

// LedgerOpen is store.Executor.LedgerOpen, read from the store, as
// LedgerTouched.
func (b *batchTx) LedgerOpen(ctx context.Context, p store.MessageRef) (store.OpenCall, error) {
	return b.tx.LedgerOpen(ctx, p)
}

// TurnWaits is store.Executor.TurnWaits.
func (b *batchTx) TurnWaits(ctx context.Context, p store.MessageRef) (int, error) {
	return b.tx.TurnWaits(ctx, p)
}

// TurnTake is store.Executor.TurnTake; the key now has a turn, which the
// gate of its later messages in the batch must see (HasRetries). In an
// optimistic run, a turn of a message without a business key whose turn
// the prefetch read free or its own waits for the next flush, to be
// written with the others in one statement (turns).
func (b *batchTx) TurnTake(ctx context.Context, p store.TurnTakeParams) (string, error) {
	b.retryWritten(p.PartitionKey)
	if ks, ok := b.keys[p.PartitionKey]; ok && p.Consumer == b.consumer {
		ks.HasRetries = true
		b.keys[p.PartitionKey] = ks
	}
	id := store.Identity{Source: p.Source, ID: p.ID}
	bound, known := b.aheadBound[id]
	if b.optimistic && known && p.Consumer == b.consumer && p.BusinessKey == "" && !p.Waited && (bound == "" || bound == p.PayloadHash) {
		b.turns = append(b.turns, store.TurnRow{Source: p.Source, ID: p.ID, PartitionKey: p.PartitionKey, PayloadHash: p.PayloadHash})
		b.turnAt = p.At
		b.aheadBound[id] = p.PayloadHash
		return p.PayloadHash, nil
	}
	delete(b.aheadBound, id)
	if err := b.flush(ctx); err != nil {
		return "", err
	}
	return b.tx.TurnTake(ctx, p)
}

// DecisionClaim is store.Executor.DecisionClaim. In an optimistic run it
// is taken at the end of the run with the others in one statement
// (claims), and answers claimed until then: the claim is read only after
// the commit, by the message's decider, and one another owner held is
// taken off the message first (takeClaims).
func (b *batchTx) DecisionClaim(ctx context.Context, p store.DecisionClaimParams) (store.DecisionClaim, error) {
	if b.optimistic && p.Consumer == b.consumer {
		b.claims = append(b.claims, p)
		return store.DecisionClaim{Claimed: true, Until: p.Until}, nil
	}
	return b.tx.DecisionClaim(ctx, p)
}

// takeClaims takes the run's deferred claims (DecisionClaim), in one
// statement per owner, at the earliest time and until the earliest end
// among them; a message whose claim another owner holds has its claim
// taken off, and its decider claims for itself.
func (b *batchTx) takeClaims(ctx context.Context) error {
	var ids []store.Identity
	for len(b.claims) > 0 {
		p := b.claimsOfFirstOwner()
		claimed, err := b.tx.DecisionClaimMany(ctx, p)
		if err != nil {
			return err
		}
		b.claimsTaken(p.Owner, claimed)
		if b.lookAfterClaims {
			for id := range claimed {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	decided, err := b.tx.DecisionGetMany(ctx, store.IdentitiesRef{Consumer: b.consumer, IDs: ids})
	if err != nil {
		return err
	}
	b.lookedAfterClaims(decided)
	return nil
}

// lookedAfterClaims marks the claims of the run's stopped messages that
// decided, the decisions read after the claims in the same transaction,
// does not hold: their deciders ask without looking again while the
// claim is fresh. A message with a decision keeps its claim unmarked:
// its decider looks, and finds it. That read is the decider's look
// (DecisionLook) but for the identity's inbox row and turn, which this
// transaction holds as it read them: it inserted the row (a copy's
// insert elsewhere waits for it, and it is taken back before the
// commit) and took the turn.
func (b *batchTx) lookedAfterClaims(decided map[store.Identity]store.Decision) {
	for i, u := range b.undecided {
		_, found := decided[store.Identity{Source: u.ev.Source, ID: u.ev.ID}]
		if u.claim.owner != "" && !u.after && !found {
			b.undecided[i].claim.looked = true
		}
	}
}

// claimsOfFirstOwner takes out of the run's deferred claims those of the
// first one's owner, as one DecisionClaimMany: at the earliest time and
// until the earliest end among them.
func (b *batchTx) claimsOfFirstOwner() store.DecisionClaimManyParams {
	owner := b.claims[0].Owner
	p := store.DecisionClaimManyParams{Consumer: b.consumer, Owner: owner, Now: b.claims[0].Now, Until: b.claims[0].Until}
	rest := b.claims[:0]
	for _, c := range b.claims {
		if c.Owner != owner {
			rest = append(rest, c)
			continue
		}
		p.IDs = append(p.IDs, store.Identity{Source: c.Source, ID: c.ID})
		if c.Now.Before(p.Now) {
			p.Now = c.Now
		}
		if c.Until.Before(p.Until) {
			p.Until = c.Until
		}
	}
	b.claims = rest
	return p
}

// claimsTaken takes the claim off each message of owner's whose identity
// claimed does not hold: another owner holds it.
func (b *batchTx) claimsTaken(owner string, claimed map[store.Identity]bool) {
	for i, u := range b.undecided {
		if u.claim.owner == owner && !claimed[store.Identity{Source: u.ev.Source, ID: u.ev.ID}] {
			b.undecided[i].claim = preClaim{}
		}
	}
}

// Business keys. The identities a batch inserted are recorded as applied
// until their delivery says otherwise, which is what these read.

// BusinessKeyClaim is store.Executor.BusinessKeyClaim.
func (b *batchTx) BusinessKeyClaim(ctx context.Context, p store.BusinessKeyClaimParams) (bool, error) {
	return b.tx.BusinessKeyClaim(ctx, p)
}

// lockBusinessKey is store.Executor.BusinessKeyLock, once per business
// key and transaction.
func (b *batchTx) lockBusinessKey(ctx context.Context, consumer, businessKey string) error {
	if b.businessKeys[businessKey] {
		return nil
	}
	if err := b.tx.BusinessKeyLock(ctx, store.BusinessKeyRef{Consumer: consumer, BusinessKey: businessKey}); err != nil {
		return err
	}
	if b.businessKeys == nil {
		b.businessKeys = map[string]bool{}
	}
	b.businessKeys[businessKey] = true
	return nil
}

// TurnBoundTo is store.Executor.TurnBoundTo, answered from what the
// prefetch read under the key locks it took first, as the batch's own
// turn writes keep it (aheadBound); else after the deferred writes.
func (b *batchTx) TurnBoundTo(ctx context.Context, p store.MessageRef) (string, error) {
	id := store.Identity{Source: p.Source, ID: p.ID}
	if hash, ok := b.aheadBound[id]; ok && p.Consumer == b.consumer {
		return hash, nil
	}
	if err := b.flush(ctx); err != nil {
		return "", err
	}
	return b.tx.TurnBoundTo(ctx, p)
}

// TurnHeld is store.Executor.TurnHeld, after the deferred turns.
func (b *batchTx) TurnHeld(ctx context.Context, p store.MessageRef) (bool, error) {
	if err := b.flush(ctx); err != nil {
		return false, err
	}
	return b.tx.TurnHeld(ctx, p)
}

// BusinessKeyInFlight is store.Executor.BusinessKeyInFlight, after the deferred writes.
func (b *batchTx) BusinessKeyInFlight(ctx context.Context, p store.BusinessKeyRef) (store.Identity, error) {
	if err := b.flush(ctx); err != nil {
		return store.Identity{}, err
	}
	return b.tx.BusinessKeyInFlight(ctx, p)
}

// BusinessKeyTouched is store.Executor.BusinessKeyTouched, after the deferred writes.
func (b *batchTx) BusinessKeyTouched(ctx context.Context, p store.BusinessKeyRef) (store.Identity, error) {
	if err := b.flush(ctx); err != nil {
		return store.Identity{}, err
	}
	return b.tx.BusinessKeyTouched(ctx, p)
}

// SQL is the transaction the handler writes its business effects in.
func (b *batchTx) SQL() *sql.Tx { return b.tx.SQL() }

// handlerTx is the Handler's Tx: the queue of an optimistic run on a
// store that pipelines (only such a run has one), else the transaction.
func (b *batchTx) handlerTx() Tx {
	if b.queue != nil {
		return b.queue
	}
	return b.tx.SQL()
}
