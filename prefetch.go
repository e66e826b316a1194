package seqbox

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// parseAll parses every delivery once, before the batch's transaction
// begins: on SQLite, the one writer's turn is then spent on writes only.
func (p *pipeline) parseAll(ins []input) {
	for i := range ins {
		in := &ins[i]
		if in.parkedRow() == nil && in.oversized() == nil && in.isMessage() && !in.parsed {
			in.ev, in.perr = p.parse(in.raw)
			in.parsed = true
		}
	}
}

// parse parses a delivery's body as the consumer's inputs are parsed
// (Config.VolatileAttributes left out of the hash).
func (p *pipeline) parse(raw []byte) (seqboxtype.Event, error) {
	return seqboxtype.ParseEventExcluding(raw, p.cfg.VolatileAttributes)
}

// prefetch is the set-based start of an optimistic run, after parseAll:
// it locks the keys that exist (in one order for every
// batch), inserts the new identities in multi-row statements (the primary
// key decides, as one by one), and creates and locks the keys those
// identities bring, and reads the rows of the identities already
// recorded. Deliveries then find their identity, its row and their key in
// memory. A message parked, redriven or oversized takes the ordinary path,
// and so does the second delivery of one identity in the batch.
func (p *pipeline) prefetch(ctx context.Context, tx *batchTx, ins []input, now time.Time) error {
	tx.consumer, tx.optimistic = p.cfg.Name, true
	seen := make(map[store.Identity]bool, len(ins))
	repeated := map[store.Identity]bool{} // identities sent more than once in the batch
	rows := make([]store.InboxRow, 0, len(ins))
	keys := make([]string, 0, len(ins))
	for i := range ins {
		in := &ins[i]
		// parseAll parsed every delivery that can take this path.
		if !in.parsed || in.perr != nil || in.redrive() || !in.isMessage() {
			continue
		}
		id := store.Identity{Source: in.ev.Source, ID: in.ev.ID}
		if seen[id] {
			repeated[id] = true
			continue
		}
		seen[id] = true
		// Recorded as applied from the start: in an optimistic run a
		// delivery either applies, or records another outcome over it,
		// or the run is abandoned (see batchTx.provisional).
		row := p.inboxRow(in.ev, now)
		row.Outcome, row.ProcessedAt = seqboxtype.Applied, &now
		rows = append(rows, row)
		if in.ev.PartitionKey != "" {
			keys = append(keys, in.ev.PartitionKey)
		}
	}
	// The keys are locked before the identities go in, in one round trip
	// on a store that pipelines, with the reads ahead.
	var inserted []bool
	var err error
	ahead := p.newReadsAhead(tx, keys, rows)
	if tx.keys, inserted, err = tx.KeyLockInsertMany(ctx, store.KeyLockManyParams{Consumer: p.cfg.Name, Keys: keys}, rows, ahead); err != nil {
		return err
	}
	tx.inserted = make(map[store.Identity]bool, len(rows))
	tx.provisional = make(map[store.Identity]bool, len(rows))
	var missing []string
	var resent []store.Identity
	for i, r := range rows {
		id := store.Identity{Source: r.Source, ID: r.ID}
		tx.inserted[id] = inserted[i]
		if inserted[i] {
			tx.provisional[id] = true
		} else {
			resent = append(resent, id)
		}
		if _, ok := tx.keys[r.PartitionKey]; inserted[i] && r.PartitionKey != "" && !ok {
			missing = append(missing, r.PartitionKey)
		}
	}
	// The identities recorded before the batch (re-sends): their rows
	// in one statement, for the duplicate-or-collision check, instead of
	// a read each.
	if len(resent) > 0 {
		if tx.existing, err = tx.tx.InboxGetMany(ctx, store.InboxGetManyParams{Consumer: p.cfg.Name, IDs: resent}); err != nil {
			return err
		}
	}
	if err := p.readRetryRows(ctx, tx, ahead); err != nil {
		return err
	}
	if err := p.readAhead(ctx, tx, rows, inserted, repeated, ahead); err != nil {
		return err
	}
	// The rows inserted for identities that come again later in the
	// batch answer those copies (batchTx.existing).
	for i, r := range rows {
		id := store.Identity{Source: r.Source, ID: r.ID}
		if inserted[i] && repeated[id] {
			if tx.existing == nil {
				tx.existing = map[store.Identity]store.InboxRow{}
			}
			// As a read would return it: times to the microsecond, in UTC.
			tx.existing[id] = asStored(r)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := tx.KeyEnsureMany(ctx, store.KeyEnsureManyParams{Consumer: p.cfg.Name, Keys: missing, At: now}); err != nil {
		return err
	}
	created, err := tx.KeyLockMany(ctx, store.KeyLockManyParams{Consumer: p.cfg.Name, Keys: missing})
	for k, ks := range created {
		tx.keys[k] = ks
	}
	return err
}

// readRetryRows reads, in one statement, the identities of the retry rows
// on the batch's keys that have any (their turns, or attempts counted),
// under the keys' locks: the gate then tells from memory that no other
// identity holds a key's turn (batchTx.noOtherRetrying), instead of a
// RetryOnKey per message, each of which sent the run's deferred writes
// first. With reads ahead, they were read already.
func (p *pipeline) readRetryRows(ctx context.Context, tx *batchTx, ahead *readsAhead) error {
	var keys []string
	for k, ks := range tx.keys {
		if ks.HasRetries {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	ids := map[string][]store.Identity(nil)
	var err error
	if ahead != nil {
		ids = ahead.retryIDs
	} else if ids, err = tx.tx.RetryRowsOnKeys(ctx, store.KeysRef{Consumer: p.cfg.Name, Keys: keys}); err != nil {
		return err
	}
	tx.retryIDs = make(map[string][]store.Identity, len(keys))
	for _, k := range keys {
		tx.retryIDs[k] = ids[k]
	}
	return nil
}

// readAhead reads, for a consumer with Decide, the decisions and turns
// of the identities the prefetch inserted (each sent once in the batch)
// in one statement each, instead of a read per delivery
// (batchTx.aheadDecisions, aheadBound). It runs after the key locks.
// With reads ahead, they were read already.
func (p *pipeline) readAhead(ctx context.Context, tx *batchTx, rows []store.InboxRow, inserted []bool, repeated map[store.Identity]bool, ahead *readsAhead) error {
	if p.cfg.Decide == nil {
		return nil
	}
	ids := make([]store.Identity, 0, len(rows))
	for i, r := range rows {
		if id := (store.Identity{Source: r.Source, ID: r.ID}); inserted[i] && !repeated[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	decisions, bound := map[store.Identity]store.Decision(nil), map[store.Identity]string(nil)
	if ahead != nil {
		decisions, bound = ahead.decisions, ahead.bound
	} else {
		ref := store.IdentitiesRef{Consumer: p.cfg.Name, IDs: ids}
		var err error
		if decisions, err = tx.tx.DecisionGetMany(ctx, ref); err != nil {
			return err
		}
		if bound, err = tx.tx.TurnBoundToMany(ctx, ref); err != nil {
			return err
		}
	}
	tx.aheadDecisions = make(map[store.Identity]aheadDecision, len(ids))
	tx.aheadBound = make(map[store.Identity]string, len(ids))
	for _, id := range ids {
		d, found := decisions[id]
		tx.aheadDecisions[id] = aheadDecision{d: d, found: found}
		tx.aheadBound[id] = bound[id]
	}
	return nil
}

// readsAhead are the reads a batch of a consumer with Decide sends, on a
// store that pipelines, in the round trip that locks its keys and inserts
// its identities (KeyLockInsertMany), instead of a round trip each after
// it: the retry rows of every key of the batch, and the decisions and
// turns of every identity. They run after the same statements, in the
// same order, as readRetryRows and readAhead would run them, and read a
// superset of what those keep (the keys found with retry rows, the
// identities inserted). Nil elsewhere: each is read when needed.
type readsAhead struct {
	stmts     []store.Statement
	retryIDs  map[string][]store.Identity
	decisions map[store.Identity]store.Decision
	bound     map[store.Identity]string
}

// newReadsAhead returns the reads ahead of a batch of rows on keys, or nil
// when it has none (no Decide, a store that does not pipeline, no rows).
func (p *pipeline) newReadsAhead(tx *batchTx, keys []string, rows []store.InboxRow) *readsAhead {
	pl, ok := tx.tx.(store.Pipeliner)
	if !ok || p.cfg.Decide == nil || len(rows) == 0 {
		return nil
	}
	a := &readsAhead{retryIDs: map[string][]store.Identity{}, decisions: make(map[store.Identity]store.Decision, len(rows)),
		bound: make(map[store.Identity]string, len(rows))}
	if len(keys) > 0 {
		a.stmts = append(a.stmts, pl.RetryRowsStatement(store.KeysRef{Consumer: p.cfg.Name, Keys: keys}, a.retryIDs))
	}
	ids := make([]store.Identity, len(rows))
	for i, r := range rows {
		ids[i] = store.Identity{Source: r.Source, ID: r.ID}
	}
	ref := store.IdentitiesRef{Consumer: p.cfg.Name, IDs: ids}
	a.stmts = append(a.stmts, pl.DecisionsStatement(ref, a.decisions), pl.TurnsBoundStatement(ref, a.bound))
	return a
}

// statements are a's statements (none for nil).
func (a *readsAhead) statements() []store.Statement {
	if a == nil {
		return nil
	}
	return a.stmts
}

// asStored is r as the store returns it: its times to the microsecond,
// in UTC.
func asStored(r store.InboxRow) store.InboxRow {
	r.ReceivedAt = micro(r.ReceivedAt)
	r.RetentionUntil = micro(r.RetentionUntil)
	if r.ProcessedAt != nil {
		t := micro(*r.ProcessedAt)
		r.ProcessedAt = &t
	}
	return r
}

func micro(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()).UTC() }
