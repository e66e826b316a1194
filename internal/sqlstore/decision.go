package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

const decisionQuery = `SELECT decision, payload_hash FROM seqbox_decisions WHERE consumer = $1 AND source = $2 AND id = $3`

func (t *Executor) readDecision(ctx context.Context, consumer, source, id string) (store.Decision, error) {
	var d store.Decision
	err := t.queryRow(ctx, decisionQuery, consumer, source, id).Scan(&d.Value, &d.PayloadHash)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Decision{}, store.ErrNotFound
	}
	return d, err
}

// DecisionGet reads the decision recorded for an identity.
func (t *Executor) DecisionGet(ctx context.Context, p store.MessageRef) (store.Decision, error) {
	return t.readDecision(ctx, p.Consumer, p.Source, p.ID)
}

const insertDecision = `INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at, payload_hash)
	VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (consumer, source, id) DO NOTHING`

const dropClaim = `DELETE FROM seqbox_decision_claims WHERE consumer = $1 AND source = $2 AND id = $3 AND owner = $4`

// DecisionRecord stores a decision unless one is recorded, and returns the
// recorded one. With an Owner, that owner's claim is dropped in the same
// commit: one write after the call, not two; with an Effect, the call's
// result is recorded in it too, or nothing is (store.ErrEffectChanged).
func (o *Executor) DecisionRecord(ctx context.Context, p store.DecisionRecordParams) (store.Decision, error) {
	if p.Effect != nil && p.Effect.Calls == 0 {
		return store.Decision{}, errors.New("sqlstore: a decision's effect must name its call (Calls)")
	}
	args := []any{p.Consumer, p.Source, p.ID, p.Decision, micros(p.At), p.PayloadHash}
	var inserted bool
	var err error
	switch {
	case o.group != nil:
		// One grouped job: the record, the call's result and the drop
		// commit together.
		var then []groupStmt
		if p.Effect != nil {
			q, eargs := effectRecordStmt(*p.Effect, 0)
			then = append(then, groupStmt{q: q, args: eargs, check: effectChanged})
		}
		if p.Owner != "" {
			then = append(then, groupStmt{q: dropClaim, args: []any{p.Consumer, p.Source, p.ID, p.Owner}})
		}
		inserted, err = affectedOne(o.group.exec(ctx, insertDecision, args, then...))
	case o.tx != nil || o.serialWriters:
		inserted, err = o.recordInTx(ctx, p, args)
	default:
		inserted, err = o.recordInOne(ctx, p, args)
	}
	if err != nil {
		return store.Decision{}, err
	}
	if inserted {
		// Inserted: the recorded decision is this one, without a read.
		return store.Decision{Value: p.Decision, PayloadHash: p.PayloadHash}, nil
	}
	return o.readDecision(ctx, p.Consumer, p.Source, p.ID)
}

// effectChanged fails a decision's grouped record when its effect's
// UPDATE found the row no longer its call's.
func effectChanged(res sql.Result) error {
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmp.Or(err, store.ErrEffectChanged)
	}
	return nil
}

// recordInTx is DecisionRecord in the executor's transaction (or on a
// pool of one writer without a group): a statement at a time, the call's
// result first, so that a changed one stops it before anything is
// written.
func (o *Executor) recordInTx(ctx context.Context, p store.DecisionRecordParams, args []any) (bool, error) {
	if p.Effect != nil {
		q, eargs := effectRecordStmt(*p.Effect, 0)
		res, err := o.exec(ctx, q, eargs...)
		if err == nil {
			err = effectChanged(res)
		}
		if err != nil {
			return false, err
		}
	}
	inserted, err := affectedOne(o.exec(ctx, insertDecision, args...))
	if err == nil && p.Owner != "" {
		_, err = o.exec(ctx, dropClaim, p.Consumer, p.Source, p.ID, p.Owner)
	}
	return inserted, err
}

// recordInOne is DecisionRecord on PostgreSQL's pool: one statement, one
// commit. The call's result conditions the rest: a row no longer its
// call's updates nothing, and then nothing else is written either.
func (o *Executor) recordInOne(ctx context.Context, p store.DecisionRecordParams, args []any) (bool, error) {
	if p.Effect == nil && p.Owner == "" {
		n, err := o.single(ctx, store.Statement{Query: insertDecision, Args: args})
		return n == 1, err
	}
	if p.Effect == nil {
		n, err := o.single(ctx, store.Statement{Query: `WITH dropped AS (DELETE FROM seqbox_decision_claims
			WHERE consumer = $1 AND source = $2 AND id = $3 AND owner = $7)
			` + insertDecision, Args: append(args, p.Owner)})
		return n == 1, err
	}
	args = append(args, p.Owner)
	eq, eargs := effectRecordStmt(*p.Effect, len(args))
	args = append(args, eargs...)
	var changed, inserted int
	_, err := o.single(ctx, store.Statement{Query: `WITH e AS (` + eq + ` RETURNING 1),
		dropped AS (DELETE FROM seqbox_decision_claims
			WHERE consumer = $1 AND source = $2 AND id = $3 AND owner = $7::text AND EXISTS (SELECT 1 FROM e)),
		ins AS (INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at, payload_hash)
			SELECT $1::text, $2::text, $3::text, $4::bytea, $5::bigint, $6::text WHERE EXISTS (SELECT 1 FROM e)
			ON CONFLICT (consumer, source, id) DO NOTHING RETURNING 1)
		SELECT (SELECT COUNT(*) FROM e), (SELECT COUNT(*) FROM ins)`, Args: args, Read: oneRow(&changed, &inserted)})
	if err != nil {
		return false, err
	}
	if changed == 0 {
		return false, store.ErrEffectChanged
	}
	return inserted == 1, nil
}

// InboxSeen reads an identity's outcome and payload hash, unlocked.
func (o *Executor) InboxSeen(ctx context.Context, p store.MessageRef) (store.Seen, error) {
	var s store.Seen
	err := o.queryRow(ctx, `SELECT outcome, payload_hash FROM seqbox_inbox
		WHERE consumer = $1 AND source = $2 AND id = $3`, p.Consumer, p.Source, p.ID).Scan(&s.Outcome, &s.PayloadHash)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Seen{}, store.ErrNotFound
	}
	return s, err
}

func (o *Executor) KeyVersion(ctx context.Context, p store.KeyRef) (*int64, error) {
	consumer, key := p.Consumer, p.Key
	var v sql.NullInt64
	err := o.queryRow(ctx, `SELECT version FROM seqbox_keys WHERE consumer = $1 AND partitionkey = $2`,
		consumer, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return ptrInt(v), err
}

// DecisionClaim claims the right to decide an identity.
func (o *Executor) DecisionClaim(ctx context.Context, p store.DecisionClaimParams) (store.DecisionClaim, error) {
	res, err := o.exec(ctx, `INSERT INTO seqbox_decision_claims (consumer, source, id, owner, expires_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (consumer, source, id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE seqbox_decision_claims.owner = excluded.owner OR seqbox_decision_claims.expires_at <= $6`,
		p.Consumer, p.Source, p.ID, p.Owner, micros(p.Until), micros(p.Now))
	if err != nil {
		return store.DecisionClaim{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return store.DecisionClaim{Claimed: n == 1, Until: p.Until}, err
	}
	var held int64
	err = o.queryRow(ctx, `SELECT expires_at FROM seqbox_decision_claims
		WHERE consumer = $1 AND source = $2 AND id = $3`, p.Consumer, p.Source, p.ID).Scan(&held)
	if errors.Is(err, sql.ErrNoRows) {
		return store.DecisionClaim{Until: p.Now}, nil // unclaimed meanwhile: try again at once
	}
	return store.DecisionClaim{Until: time.UnixMicro(held)}, err
}

// DecisionUnclaim drops an owner's claim.
func (o *Executor) DecisionUnclaim(ctx context.Context, p store.DecisionUnclaimParams) error {
	_, err := o.exec(ctx, dropClaim, p.Consumer, p.Source, p.ID, p.Owner)
	return err
}

// DecisionClaimExtend moves an owner's claim on.
func (o *Executor) DecisionClaimExtend(ctx context.Context, p store.DecisionClaimParams) (bool, error) {
	res, err := o.exec(ctx, `UPDATE seqbox_decision_claims SET expires_at = $5
		WHERE consumer = $1 AND source = $2 AND id = $3 AND owner = $4`, p.Consumer, p.Source, p.ID, p.Owner, micros(p.Until))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// unsettled is the condition on a retry row r that its identity has not
// settled: not in the inbox yet, or parked there (held or blocked), or
// left pending by a crash, or dead-lettered with its DLQ row still open
// (the dead letter cleared its row: this one is a redrive's turn; the
// state-machine test found a redrive under OnDeadLetter=release holding
// no turn while it was decided).
const unsettled = `(NOT EXISTS (SELECT 1 FROM seqbox_inbox i
			WHERE i.consumer = r.consumer AND i.source = r.source AND i.id = r.id
			AND i.outcome NOT IN ('held', 'blocked', ''))
		OR EXISTS (SELECT 1 FROM seqbox_dlq d
			WHERE d.consumer = r.consumer AND d.source = r.source AND d.id = r.id AND d.state = 'open'))`

// TurnTake writes a retry row with no attempt counted, unless the
// identity has one; its business key and the time it was last seen
// (last_at) are recorded either way, unless the row is bound to another
// payload hash, which it then returns untouched.
func (o *Executor) TurnTake(ctx context.Context, p store.TurnTakeParams) (string, error) {
	var bound string
	waited := 0
	if p.Waited {
		waited = 1
	}
	err := o.queryRow(ctx, `INSERT INTO seqbox_retries
		(consumer, source, id, partitionkey, businesskey, attempts, first_error, last_error, first_at, last_at, payload_hash, waits)
		VALUES ($1, $2, $3, $4, $5, 0, '', '', `+turnFirstAt+`, $6, $7, $8)
		ON CONFLICT (consumer, source, id) DO UPDATE SET businesskey = excluded.businesskey,
			payload_hash = excluded.payload_hash, last_at = excluded.last_at, waits = seqbox_retries.waits + excluded.waits
		WHERE seqbox_retries.payload_hash IN ('', excluded.payload_hash)
		RETURNING payload_hash`,
		p.Consumer, p.Source, p.ID, p.PartitionKey, p.BusinessKey, micros(p.At), p.PayloadHash, waited).Scan(&bound)
	if !errors.Is(err, sql.ErrNoRows) {
		return bound, err
	}
	// Bound to another copy: the row stays as it is.
	err = o.queryRow(ctx, `SELECT payload_hash FROM seqbox_retries WHERE consumer = $1 AND source = $2 AND id = $3`,
		p.Consumer, p.Source, p.ID).Scan(&bound)
	return bound, err
}

// TurnWaits is store.Executor.TurnWaits.
func (o *Executor) TurnWaits(ctx context.Context, p store.MessageRef) (int, error) {
	var waits int
	err := o.queryRow(ctx, `SELECT waits FROM seqbox_retries WHERE consumer = $1 AND source = $2 AND id = $3`,
		p.Consumer, p.Source, p.ID).Scan(&waits)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return waits, err
}

// turnFirstAt is when a new turn counts as taken: now ($6), or just after
// the latest turn of its business key ($5) if that one is later, so that
// of two turns of one business key the one taken first (under
// BusinessKeyLock, the one committed first) is also the earlier one,
// whatever the clocks of the processes that took them said.
const turnFirstAt = `(SELECT CASE WHEN MAX(b.first_at) >= $6 THEN MAX(b.first_at) + 1 ELSE $6 END
		FROM seqbox_retries b WHERE b.consumer = $1 AND b.businesskey = $5 AND $5 <> '')`

// BusinessKeyLock, in a transaction on a database that runs write
// transactions side by side (PostgreSQL), takes the business key's
// advisory lock until the transaction ends. Under READ COMMITTED a read
// finds no turn that another transaction took and has not committed; with
// the lock, the read waits for that commit and sees it, so the business
// key is reserved by the check and the turn together. SQLite runs one
// write transaction at a time, and a call outside a transaction would
// hold the lock for no longer than its statement: neither takes one.
func (o *Executor) BusinessKeyLock(ctx context.Context, p store.BusinessKeyRef) error {
	if o.tx == nil || o.serialWriters {
		return nil
	}
	// Two names sharing a lock (a hash collision, or a "/" in the
	// consumer's name) only wait for each other.
	_, err := o.exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, `+strconv.FormatInt(dialect.BusinessKeyLockSeed, 10)+`))`,
		p.Consumer+"/"+p.BusinessKey)
	return err
}

// BusinessKeyInFlight finds another unsettled identity holding a turn for
// the business key that goes before this one. In a transaction that
// took BusinessKeyLock its answer holds until the transaction ends.
func (o *Executor) BusinessKeyInFlight(ctx context.Context, p store.BusinessKeyRef) (store.Identity, error) {
	var id store.Identity
	// Of two identities waiting on each other, one goes first: one that
	// made a call that took effect or may have (a redriven one) goes
	// before one that made none; otherwise the earlier turn goes first
	// (the model's guards "business key: in flight elsewhere" and
	// "business key: touched by a settled identity", internal/model).
	const touched = `EXISTS (SELECT 1 FROM seqbox_effects e WHERE e.consumer = $1 AND e.source = %s AND e.id = %s
			AND e.state IN ('pending', 'uncertain', 'succeeded'))`
	theirs, mine := fmt.Sprintf(touched, "r.source", "r.id"), fmt.Sprintf(touched, "$3", "$4")
	first := `NOT EXISTS (SELECT 1 FROM seqbox_retries m WHERE m.consumer = $1 AND m.source = $3 AND m.id = $4
			AND m.businesskey = $2 AND (m.first_at, m.source, m.id) < (r.first_at, r.source, r.id))`
	err := o.queryRow(ctx, `SELECT r.source, r.id FROM seqbox_retries r
		WHERE r.consumer = $1 AND r.businesskey = $2 AND NOT (r.source = $3 AND r.id = $4) AND `+unsettled+`
		AND ((NOT `+mine+` AND (`+theirs+` OR `+first+`)) OR (`+mine+` AND `+theirs+` AND `+first+`))
		ORDER BY r.first_at LIMIT 1`, p.Consumer, p.BusinessKey, p.Source, p.ID).Scan(&id.Source, &id.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return id, store.ErrNotFound
	}
	return id, err
}

// BusinessKeyTouched finds another identity of the business key that
// settled without applying while a call of it took effect or may have.
func (o *Executor) BusinessKeyTouched(ctx context.Context, p store.BusinessKeyRef) (store.Identity, error) {
	var id store.Identity
	err := o.queryRow(ctx, `SELECT i.source, i.id FROM seqbox_inbox i
		WHERE i.consumer = $1 AND i.businesskey = $2 AND NOT (i.source = $3 AND i.id = $4)
		AND i.businesskey <> '' AND i.outcome IN ('dead_lettered', 'stale', 'expired')
		AND EXISTS (SELECT 1 FROM seqbox_effects e WHERE e.consumer = i.consumer AND e.source = i.source AND e.id = i.id
			AND e.state IN ('pending', 'uncertain', 'succeeded'))
		LIMIT 1`, p.Consumer, p.BusinessKey, p.Source, p.ID).Scan(&id.Source, &id.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return id, store.ErrNotFound
	}
	return id, err
}

// TurnHeld reports whether the identity has a retry row.
func (o *Executor) TurnHeld(ctx context.Context, p store.MessageRef) (bool, error) {
	var one int
	err := o.queryRow(ctx, `SELECT 1 FROM seqbox_retries WHERE consumer = $1 AND source = $2 AND id = $3`,
		p.Consumer, p.Source, p.ID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// TurnBoundTo returns the payload hash the identity's retry row is bound
// to, "" when none.
func (o *Executor) TurnBoundTo(ctx context.Context, p store.MessageRef) (string, error) {
	var hash string
	err := o.queryRow(ctx, `SELECT payload_hash FROM seqbox_retries WHERE consumer = $1 AND source = $2 AND id = $3`,
		p.Consumer, p.Source, p.ID).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return hash, err
}

// GapCovers reports whether a gap row of the key covers the version.
func (o *Executor) GapCovers(ctx context.Context, p store.GapCoversParams) (bool, error) {
	var one int
	err := o.queryRow(ctx, `SELECT 1 FROM seqbox_gaps WHERE consumer = $1 AND partitionkey = $2
		AND from_version <= $3 AND to_version >= $3 LIMIT 1`, p.Consumer, p.Key, p.Version).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// DecisionClaimLive reports a claim on the identity that has not run out.
func (o *Executor) DecisionClaimLive(ctx context.Context, p store.DecisionClaimParams) (bool, error) {
	var one int
	err := o.queryRow(ctx, `SELECT 1 FROM seqbox_decision_claims WHERE consumer = $1 AND source = $2 AND id = $3
		AND expires_at > $4`, p.Consumer, p.Source, p.ID, micros(p.Now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// LedgerTouched reports a ledger row of the identity whose call took
// effect or may have.
func (o *Executor) LedgerTouched(ctx context.Context, p store.MessageRef) (bool, error) {
	var one int
	err := o.queryRow(ctx, `SELECT 1 FROM seqbox_effects WHERE consumer = $1 AND source = $2 AND id = $3
		AND state IN ('pending', 'uncertain', 'succeeded') LIMIT 1`, p.Consumer, p.Source, p.ID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// LedgerOpen finds a ledger row of the identity that is pending or
// uncertain.
func (o *Executor) LedgerOpen(ctx context.Context, p store.MessageRef) (store.OpenCall, error) {
	var c store.OpenCall
	err := o.queryRow(ctx, `SELECT idempotency_key, state FROM seqbox_effects WHERE consumer = $1 AND source = $2 AND id = $3
		AND state IN ('pending', 'uncertain') ORDER BY idempotency_key LIMIT 1`, p.Consumer, p.Source, p.ID).Scan(&c.IdempotencyKey, &c.State)
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	return c, err
}

// DecisionGetMany reads the decisions of many identities, a primary-key
// term each (as InboxGetMany).
func (t *Executor) DecisionGetMany(ctx context.Context, p store.IdentitiesRef) (map[store.Identity]store.Decision, error) {
	out := make(map[store.Identity]store.Decision, len(p.IDs))
	return out, t.readMany(ctx, p, decisionsRead(out))
}

// TurnBoundToMany reads the payload hashes the turns of many identities
// are bound to.
func (t *Executor) TurnBoundToMany(ctx context.Context, p store.IdentitiesRef) (map[store.Identity]string, error) {
	out := make(map[store.Identity]string, len(p.IDs))
	return out, t.readMany(ctx, p, turnsBoundRead(out))
}

// manyRead is what readMany reads for each identity: columns of table,
// each row of (source, id, columns...) read by scan.
type manyRead struct {
	columns, table string
	// keyOnly: the table's one index is its key, so a probe per identity
	// (probeIDs) is the only plan an index offers (arrays.go).
	keyOnly bool
	scan    func(store.Rows) error
}

// decisionsRead reads decisions into out (DecisionGetMany).
func decisionsRead(out map[store.Identity]store.Decision) manyRead {
	return manyRead{"decision, payload_hash", "seqbox_decisions", true, func(rows store.Rows) error {
		var id store.Identity
		var d store.Decision
		err := rows.Scan(&id.Source, &id.ID, &d.Value, &d.PayloadHash)
		out[id] = d
		return err
	}}
}

// turnsBoundRead reads the payload hashes turns are bound to into out
// (TurnBoundToMany).
func turnsBoundRead(out map[store.Identity]string) manyRead {
	return manyRead{"payload_hash", "seqbox_retries", false, func(rows store.Rows) error {
		var id store.Identity
		var hash string
		err := rows.Scan(&id.Source, &id.ID, &hash)
		out[id] = hash
		return err
	}}
}

// readMany reads r for many identities: one statement with arrays on
// PostgreSQL (readManyArrays), else chunks of primary-key terms.
func (t *Executor) readMany(ctx context.Context, p store.IdentitiesRef, r manyRead) error {
	if len(p.IDs) == 0 {
		return nil
	}
	if t.arrays {
		return t.run(ctx, readManyArrays(p, r))
	}
	return eachChunk(len(p.IDs), func(lo, hi int) error {
		args := []any{p.Consumer}
		for _, id := range p.IDs[lo:hi] {
			args = append(args, id.Source, id.ID)
		}
		rows, err := t.query(ctx, orText(`SELECT source, id, `+r.columns+` FROM `+r.table+` WHERE {{ROWS}}`, hi-lo), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return scanAll(rows, r.scan)
	})
}

// readManyArrays is readMany's statement with arrays of identities.
func readManyArrays(p store.IdentitiesRef, r manyRead) store.Statement {
	sources, ids := make([]string, len(p.IDs)), make([]string, len(p.IDs))
	for i, id := range p.IDs {
		sources[i], ids[i] = id.Source, id.ID
	}
	if r.keyOnly {
		return store.Statement{Query: `SELECT f.*` + probeIDs(`SELECT source, id, `+r.columns+` FROM `+r.table+`
			WHERE consumer = $1 AND source = u.s AND id = u.i LIMIT 1`), Args: []any{p.Consumer, sources, ids},
			Read: func(rows store.Rows) error { return scanAll(rows, r.scan) }}
	}
	return store.Statement{Query: `SELECT t.source, t.id, ` + r.columns + ` FROM ` + r.table + ` t
			JOIN unnest($2::text[], $3::text[]) AS u(s, d) ON t.source = u.s AND t.id = u.d
			WHERE t.consumer = $1`, Args: []any{p.Consumer, sources, ids},
		Read: func(rows store.Rows) error { return scanAll(rows, r.scan) }}
}

// scanAll calls scan for each of rows.
func scanAll(rows store.Rows, scan func(store.Rows) error) error {
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// TurnTakeMany takes the turns of many messages without a business key
// in multi-row statements, as TurnTake takes one (with first_at = At, as
// turnFirstAt gives for no business key).
func (t *Executor) TurnTakeMany(ctx context.Context, p store.TurnTakeManyParams) (map[store.Identity]string, error) {
	turns := uniqueTurns(p.Turns)
	taken := make(map[store.Identity]bool, len(turns))
	var err error
	if t.arrays && len(turns) > 0 {
		err = t.run(ctx, turnTakeArrays(p.Consumer, p.At, turns, taken))
	} else {
		err = eachChunk(len(turns), func(lo, hi int) error {
			args := []any{p.Consumer, micros(p.At)}
			for _, r := range turns[lo:hi] {
				args = append(args, r.Source, r.ID, r.PartitionKey, r.PayloadHash)
			}
			return t.readIdentities(ctx, taken, rowsText(turnTakeColumns+`VALUES {{ROWS}}`+turnTakeConflict,
				"($1, $a, $b, $c, '', 0, '', '', $2, $2, $d)", 2, hi-lo), args...)
		})
	}
	if err != nil {
		return nil, err
	}
	// Bound to another copy: the rows stay as they are.
	return t.TurnBoundToMany(ctx, store.IdentitiesRef{Consumer: p.Consumer, IDs: turnsNotTaken(turns, taken)})
}

// TurnTakeMany's statement, in two parts around its rows.
const (
	turnTakeColumns = `INSERT INTO seqbox_retries
		(consumer, source, id, partitionkey, businesskey, attempts, first_error, last_error, first_at, last_at, payload_hash) `
	turnTakeConflict = ` ON CONFLICT (consumer, source, id) DO UPDATE SET businesskey = excluded.businesskey,
			payload_hash = excluded.payload_hash, last_at = excluded.last_at
		WHERE seqbox_retries.payload_hash IN ('', excluded.payload_hash)
		RETURNING source, id`
)

// turnTakeArrays is TurnTakeMany's statement with arrays of turns (each
// identity once, uniqueTurns), taken at at: it marks in taken the turns
// it took.
func turnTakeArrays(consumer string, at time.Time, turns []store.TurnRow, taken map[store.Identity]bool) store.Statement {
	cols := make([][]string, 4)
	for _, r := range turns {
		for i, v := range []string{r.Source, r.ID, r.PartitionKey, r.PayloadHash} {
			cols[i] = append(cols[i], v)
		}
	}
	return store.Statement{Query: turnTakeColumns + `SELECT $1, u.s, u.i, u.k, '', 0, '', '', $2, $2, u.h
			FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS u(s, i, k, h)` + turnTakeConflict,
		Args: []any{consumer, micros(at), cols[0], cols[1], cols[2], cols[3]},
		Read: func(rows store.Rows) error { return markIdentities(rows, taken) }}
}

// turnsNotTaken are the identities of turns (each identity once) that
// taken does not hold.
func turnsNotTaken(turns []store.TurnRow, taken map[store.Identity]bool) []store.Identity {
	var out []store.Identity
	for _, r := range turns {
		if id := (store.Identity{Source: r.Source, ID: r.ID}); !taken[id] {
			out = append(out, id)
		}
	}
	return out
}

// uniqueTurns is turns with each identity once (its first row): a
// multi-row upsert may not touch one row twice.
func uniqueTurns(turns []store.TurnRow) []store.TurnRow {
	return firstOfEach(turns, func(r store.TurnRow) store.Identity { return store.Identity{Source: r.Source, ID: r.ID} })
}

// uniqueIdentities is ids with each identity once, in order, for the same
// reason.
func uniqueIdentities(ids []store.Identity) []store.Identity {
	return firstOfEach(ids, func(id store.Identity) store.Identity { return id })
}

// firstOfEach is xs with only the first of each identity (of), in order.
func firstOfEach[T any](xs []T, of func(T) store.Identity) []T {
	seen := make(map[store.Identity]bool, len(xs))
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if id := of(x); !seen[id] {
			seen[id] = true
			out = append(out, x)
		}
	}
	return out
}

// DecisionClaimMany claims many identities for one owner in multi-row
// statements, as DecisionClaim claims one.
func (t *Executor) DecisionClaimMany(ctx context.Context, p store.DecisionClaimManyParams) (map[store.Identity]bool, error) {
	claimed := make(map[store.Identity]bool, len(p.IDs))
	ids := uniqueIdentities(p.IDs)
	if t.arrays && len(ids) > 0 {
		return claimed, t.run(ctx, decisionClaimArrays(p, ids, claimed))
	}
	return claimed, eachChunk(len(ids), func(lo, hi int) error {
		args := []any{p.Consumer, p.Owner, micros(p.Until), micros(p.Now)}
		for _, id := range ids[lo:hi] {
			args = append(args, id.Source, id.ID)
		}
		return t.readIdentities(ctx, claimed, rowsText(claimColumns+`VALUES {{ROWS}}`+claimConflict, "($1, $a, $b, $2, $3)", 4, hi-lo), args...)
	})
}

// DecisionClaimMany's statement, in two parts around its rows.
const (
	claimColumns  = `INSERT INTO seqbox_decision_claims (consumer, source, id, owner, expires_at) `
	claimConflict = ` ON CONFLICT (consumer, source, id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE seqbox_decision_claims.owner = excluded.owner OR seqbox_decision_claims.expires_at <= $4
		RETURNING source, id`
)

// decisionClaimArrays is DecisionClaimMany's statement for p's owner and
// times with arrays of ids (p.IDs each once, uniqueIdentities): it marks
// in claimed the identities it claimed.
func decisionClaimArrays(p store.DecisionClaimManyParams, ids []store.Identity, claimed map[store.Identity]bool) store.Statement {
	sources, names := make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		sources[i], names[i] = id.Source, id.ID
	}
	return store.Statement{Query: claimColumns + `SELECT $1, u.s, u.i, $2, $3 FROM unnest($5::text[], $6::text[]) AS u(s, i)` + claimConflict,
		Args: []any{p.Consumer, p.Owner, micros(p.Until), micros(p.Now), sources, names},
		Read: func(rows store.Rows) error { return markIdentities(rows, claimed) }}
}

// readIdentities runs q and marks each (source, id) row it returns in
// into.
func (t *Executor) readIdentities(ctx context.Context, into map[store.Identity]bool, q string, args ...any) error {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return markIdentities(rows, into)
}

// markIdentities marks each (source, id) row of rows in into.
func markIdentities(rows store.Rows, into map[store.Identity]bool) error {
	for rows.Next() {
		var id store.Identity
		if err := rows.Scan(&id.Source, &id.ID); err != nil {
			return err
		}
		into[id] = true
	}
	return rows.Err()
}

// DecisionLook reads a decider's look before its ask in one statement.
func (o *Executor) DecisionLook(ctx context.Context, p store.MessageRef) (store.DecisionLook, error) {
	var l store.DecisionLook
	var outcome sql.NullString
	const where = ` WHERE consumer = $1 AND source = $2 AND id = $3`
	_, err := o.single(ctx, store.Statement{Query: `SELECT EXISTS (SELECT 1 FROM seqbox_decisions` + where + `),
		(SELECT outcome FROM seqbox_inbox` + where + `),
		EXISTS (SELECT 1 FROM seqbox_retries` + where + `)`, Args: []any{p.Consumer, p.Source, p.ID},
		Read: oneRow(&l.Decided, &outcome, &l.TurnHeld)})
	if err != nil {
		// A refused send may have read into l before the look ran alone.
		return store.DecisionLook{}, err
	}
	l.Seen, l.Outcome = outcome.Valid, seqboxtype.Outcome(outcome.String)
	return l, nil
}
