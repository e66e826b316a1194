package seqbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"go.opentelemetry.io/otel/trace"
)

// input is one entry of a batch, in the batch's order: a message, or a
// key's unparking. What kind it is, and what that kind carries, is its
// kind's type (received, redriven, unparked, tooLarge, unparking); the
// fields are what every kind has.
type input struct {
	kind    inputKind
	raw     []byte
	attempt int
	// decideErr is why Config.Decide failed before the transaction; the
	// message then fails like a handler error would.
	decideErr error
	// parsed: ev and perr hold the envelope parsed once: by Run's
	// receiver (which schedules by its partitionkey), or by parseAll.
	parsed bool
	ev     seqboxtype.Event
	perr   error
	// traceParent and traceState are the producer's trace context from
	// the broker's headers, for an envelope that carries none.
	traceParent, traceState string
	// published is when the broker says the message was published (zero
	// when it does not say: transport.PublishTimer), for an envelope
	// without publishedat.
	published time.Time
	// span is the input's process span once its pass started it: the
	// parent of its settle span.
	span trace.SpanContext
}

// inputKind is one of the kinds of input below.
type inputKind interface{ inputKind() }

// received is a message from the transport, Deliver or replay: the
// ordinary kind (a nil kind is received too).
type received struct{}

// redriven is a message back from the DLQ: it may pass its own
// dead-lettered identity and the block it caused.
type redriven struct{ seq int64 }

// unparked is a message out of the parked table (row); its identity is
// recorded already.
type unparked struct{ row *store.Parked }

// tooLarge is a message too large to hand over: raw is then its first
// bytes, and it is rejected.
type tooLarge struct{ o *Oversized }

// unparking is not a message but its key's unparking: a message let out
// of the parked table runs again this way once decided (unparking takes
// it under the key's lock, if it is still next), with the input's
// decideErr going to the message named by decided.
type unparking struct {
	key     string
	decided store.Identity
}

func (received) inputKind()  {}
func (redriven) inputKind()  {}
func (unparked) inputKind()  {}
func (tooLarge) inputKind()  {}
func (unparking) inputKind() {}

// parkedRow is the parked row an unparked message came out of, else nil.
func (in input) parkedRow() *store.Parked {
	if k, ok := in.kind.(unparked); ok {
		return k.row
	}
	return nil
}

// redrive reports a message back from the DLQ.
func (in input) redrive() bool {
	_, ok := in.kind.(redriven)
	return ok
}

// redrivenSeq is the DLQ row a redriven message came from, else 0.
func (in input) redrivenSeq() int64 {
	r, _ := in.kind.(redriven)
	return r.seq
}

// oversized describes a message too large to hand over, else nil.
func (in input) oversized() *Oversized {
	if k, ok := in.kind.(tooLarge); ok {
		return k.o
	}
	return nil
}

// isMessage reports an input that is a message, not a key's unparking.
func (in input) isMessage() bool {
	_, ok := in.kind.(unparking)
	return !ok
}

// event parses the envelope, once.
func (in input) event(volatile []string) (seqboxtype.Event, error) {
	if in.parsed {
		return in.ev, in.perr
	}
	return seqboxtype.ParseEventExcluding(in.raw, volatile)
}

// message is the working record of one message on its way through the
// pipeline, changed in place by each step: the transaction, what came in
// and what it parsed to, its key's state as read under the key's lock,
// the result reached so far, its savepoint and the time it is processed
// at.
type message struct {
	tx  *batchTx
	in  input
	ev  seqboxtype.Event
	ks  store.KeyState
	res seqboxtype.Result
	sp  string
	now time.Time
	// newKey: lockKey created the key's row, within the message's
	// savepoint (rollback creates it again).
	newKey bool
	// resultRef is what the Handler named with SetResultReference.
	resultRef string
}

// reached is where a delivery ended: its results (its own first, then
// any successors it unparked) and the key to unpark next, if any.
type reached struct {
	results []seqboxtype.Result
	unpark  string
}

// pipeline holds the per-delivery logic of docs/design.md §5.
type pipeline struct {
	cfg Config
	// retryAtOnce unparks an unparked message that failed transiently again
	// at once instead of after its backoff: replay's rule for the record
	// handler (docs/design.md §17).
	retryAtOnce bool
	// hooks, set only by seqbox's own tests and chaos harness
	// (own.Options.Hook, see NewConsumer), crash the pipeline at its
	// failure windows (internal/fault).
	hooks fault.Hook
	// tr starts the process spans.
	tr tracing
	// serialWriters: the store runs one write transaction at a time
	// (SQLite), so no lock needs taking before a savepoint.
	serialWriters bool
	// claimOwner names a new claim of the consumer's decider, for the
	// claim a stopped message's transaction takes with its turn.
	claimOwner func() string
	// directTx is set once a Handler asserted that its tx is a *sql.Tx
	// and met a queuedTx: its batches no longer queue writes.
	directTx atomic.Bool
}

// deliver runs one message through inbox, gate and handler inside tx, then
// unparks the key. The first result is the message's own; any that follow
// are parked successors let out by unparking. An error means the store
// failed and the whole batch must be abandoned.
func (p *pipeline) deliver(ctx context.Context, tx *batchTx, in input) ([]seqboxtype.Result, error) {
	if k, ok := in.kind.(unparking); ok {
		return p.unparkCarrying(ctx, tx, k, in.decideErr)
	}
	r, err := p.process(ctx, tx, in)
	if err != nil || r.unpark == "" {
		return r.results, err
	}
	more, err := p.unpark(ctx, tx, r.unpark)
	return append(r.results, more...), err
}

// process reaches the message's own result, inside its process span
// (which ends when tx does: batchTx.endSpans). It returns the key to
// unpark when the key's version moved.
func (p *pipeline) process(ctx context.Context, tx *batchTx, in input) (r reached, err error) {
	ctx, span := p.tr.startProcess(ctx, &in, p.cfg.VolatileAttributes)
	defer func() {
		id := store.Identity{Source: in.ev.Source, ID: in.ev.ID}
		if len(r.results) > 0 {
			id = store.Identity{Source: r.results[0].Source, ID: r.results[0].ID}
		}
		tx.spans = append(tx.spans, openSpan{span: span, id: id, origin: tx.origin})
	}()
	now := p.cfg.Now()
	ev, perr := in.event(p.cfg.VolatileAttributes)
	if p.cfg.Decide != nil && perr == nil && in.oversized() == nil {
		if err := p.lockForTurn(ctx, tx, ev, now); err != nil {
			return reached{}, err
		}
	}
	m := &message{tx: tx, in: in, ev: ev, sp: tx.savepoint(), now: now}
	if err := tx.Savepoint(ctx, m.sp); err != nil {
		return reached{}, err
	}
	if o := in.oversized(); o != nil {
		perr = &seqboxtype.InvalidEventError{Field: "envelope", Reason: fmt.Sprintf(
			"%d bytes, larger than the %d-byte limit (the DLQ keeps its first %d bytes)", o.Size, seqboxtype.MaxEventSize, len(in.raw))}
	}
	if perr != nil {
		var err error
		m.res, err = p.reject(ctx, tx, in, perr, now)
		return p.closeSavepoint(ctx, m, "", err)
	}
	m.res = seqboxtype.Result{Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey, ObjectVersion: ev.ObjectVersion, Attempt: in.attempt,
		Occurred: ev.Time, Published: ev.PublishedAt}
	if m.res.Published.IsZero() {
		m.res.Published = in.published
	}

	if row := in.parkedRow(); row != nil {
		if err := tx.ParkedDelete(ctx, row.Seq); err != nil {
			return reached{}, err
		}
	} else {
		if in.redrive() {
			if err := p.forgetDeadLettered(ctx, tx, ev); err != nil {
				return reached{}, err
			}
		}
		inserted, err := tx.InboxInsert(ctx, p.inboxRow(ev, now))
		if err != nil {
			return reached{}, err
		}
		if !inserted {
			m.res, err = p.seenBefore(ctx, tx, ev, m.res, now)
			return p.closeSavepoint(ctx, m, "", err)
		}
		// New to the inbox, but its identity's turn may be bound to
		// another copy (taken while it waited or retried): then this copy
		// is a collision whatever it would reach next (a semantic
		// duplicate, stale, expired, applied).
		if p.cfg.Decide != nil {
			if bound, err := p.turnBoundElsewhere(ctx, tx, ev); err != nil || bound != "" {
				if err != nil {
					return reached{}, err
				}
				return p.boundElsewhere(ctx, m, bound, "its key's turn")
			}
		}
		if err := p.hooks.At(fault.AfterInboxInsert); err != nil {
			return reached{}, err
		}
	}

	if ev.PartitionKey != "" {
		var err error
		if m.ks, m.newKey, err = p.lockKey(ctx, tx, ev.PartitionKey, now); err != nil {
			return reached{}, err
		}
		if m.ks.Blocked && in.redrive() && m.ks.BlockedSource == ev.Source && m.ks.BlockedID == ev.ID {
			if err := tx.KeyUnblock(ctx, store.KeyUnblockParams{Consumer: p.cfg.Name, Key: ev.PartitionKey, At: now}); err != nil {
				return reached{}, err
			}
			m.ks.Blocked = false
		}
		gate, err := p.gate(ctx, tx, in, ev, m.ks, now)
		if err == nil && gate != nil && gate.after {
			return p.afterPredecessor(ctx, m)
		}
		if err != nil || gate != nil {
			if err == nil && gate.Outcome != "" {
				m.res.Outcome, m.res.Reason, m.res.BeforeBaseline = gate.Outcome, gate.Reason, gate.beforeBaseline
				err = p.record(ctx, tx, ev, m.res, m.ks.Version, gate.NextAction, now)
			}
			unparkKey := ""
			if gate != nil && gate.unpark {
				unparkKey = ev.PartitionKey
			}
			return p.closeSavepoint(ctx, m, unparkKey, err)
		}
	} else if expired, err := p.expiredUndecided(ctx, tx, ev, now); err != nil || expired {
		if err != nil {
			return reached{}, err
		}
		m.res.Outcome, m.res.Reason = seqboxtype.Expired, p.expiredReason(ev)
		err := p.record(ctx, tx, ev, m.res, nil, "none: past the business deadline", now)
		return p.closeSavepoint(ctx, m, "", err)
	}
	return p.apply(ctx, m)
}

// closeSavepoint closes the message's savepoint and returns its result, with
// the key to unpark: any final outcome of a keyed message may
// free the successors parked behind it (they may have waited for it while
// it retried).
func (p *pipeline) closeSavepoint(ctx context.Context, m *message, key string, err error) (reached, error) {
	if err != nil {
		return reached{}, err
	}
	if err := m.tx.SavepointRelease(ctx, m.sp); err != nil {
		return reached{}, err
	}
	if key == "" && endsOnKey(m.res.Outcome) {
		key = m.res.PartitionKey
	}
	return reached{results: []seqboxtype.Result{m.res}, unpark: key}, nil
}

// endsOnKey reports whether an outcome ends a message's life on its key, so
// that nothing waits behind it any more. It is not "final" (docs/design.md
// §2): duplicate, collision and rejected are final, but such a copy never
// held its key's place, so it frees nothing.
func endsOnKey(o seqboxtype.Outcome) bool {
	switch o {
	case seqboxtype.Retry, seqboxtype.Held, seqboxtype.Blocked, seqboxtype.Duplicate, seqboxtype.Collision, seqboxtype.Rejected, outcomeDeciding:
		return false
	}
	return true
}

func (p *pipeline) inboxRow(ev seqboxtype.Event, now time.Time) store.InboxRow {
	return store.InboxRow{
		Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, PayloadHash: ev.Hash,
		BusinessKey: ev.BusinessKey, EventType: ev.Type, Tenant: ev.TenantID, ContractVersion: ev.DataSchema, CausationID: ev.CausationID,
		PartitionKey: ev.PartitionKey, ObjectVersion: ev.ObjectVersion, Outcome: noOutcome,
		ReceivedAt: now, RetentionUntil: now.Add(p.cfg.Retention),
	}
}

// seenBefore decides duplicate or collision for an identity the inbox
// already holds.
func (p *pipeline) seenBefore(ctx context.Context, tx *batchTx, ev seqboxtype.Event, res seqboxtype.Result, now time.Time) (seqboxtype.Result, error) {
	prev, err := tx.InboxGet(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
	if err != nil {
		return res, err
	}
	if prev.PayloadHash == ev.Hash {
		res.Outcome = seqboxtype.Duplicate
		res.Reason = "identity already recorded (" + string(prev.Outcome) + ")"
		return res, p.record(ctx, tx, ev, res, nil, "none", now)
	}
	return p.collide(ctx, tx, ev, res, fmt.Sprintf("identity already recorded with payload hash %.12s, this one has %.12s", prev.PayloadHash, ev.Hash), now)
}

// collide parks ev as a collision: its identity belongs to a copy with
// another payload.
func (p *pipeline) collide(ctx context.Context, tx *batchTx, ev seqboxtype.Event, res seqboxtype.Result, reason string, now time.Time) (seqboxtype.Result, error) {
	res.Outcome, res.Reason = seqboxtype.Collision, reason
	if err := tx.ParkedInsert(ctx, p.parkRow(ev, seqboxtype.ParkCollision, res.Reason, now, time.Time{})); err != nil {
		return res, err
	}
	return res, p.record(ctx, tx, ev, res, nil, "investigate: the producer reused an identity for different content", now)
}

// forgetDeadLettered lets a redriven message re-enter under its original
// identity: the dead-lettered inbox row is removed, anything else stays.
func (p *pipeline) forgetDeadLettered(ctx context.Context, tx *batchTx, ev seqboxtype.Event) error {
	prev, err := tx.InboxGet(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || prev.Outcome != seqboxtype.DeadLettered || prev.PayloadHash != ev.Hash {
		return err
	}
	return tx.InboxDelete(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
}

// reject sends an invalid envelope to the DLQ with the reason. Its
// identity is the hash of its bytes (an inbox row under an empty source,
// which no valid event has), so the same bad input delivered again is
// rejected again without a second DLQ or audit row. A redrive always
// leaves a new DLQ row: the one it came from is resolved.
func (p *pipeline) reject(ctx context.Context, tx *batchTx, in input, perr error, now time.Time) (seqboxtype.Result, error) {
	res := seqboxtype.Result{Outcome: seqboxtype.Rejected, Reason: perr.Error(), Attempt: in.attempt}
	res.Source, res.ID, res.PartitionKey = bestEffortIdentity(in.raw)
	// The attribute the error names has no single meaning: show none.
	var ie *seqboxtype.InvalidEventError
	if errors.As(perr, &ie) {
		switch ie.Field {
		case "source":
			res.Source = ""
		case "id":
			res.ID = ""
		case "partitionkey":
			res.PartitionKey = ""
		}
	}
	sum := sha256.Sum256(in.raw)
	if o := in.oversized(); o != nil {
		sum = o.SHA256
	}
	hash := hex.EncodeToString(sum[:])
	if !in.redrive() {
		inserted, err := tx.InboxInsert(ctx, store.InboxRow{Consumer: p.cfg.Name, ID: "sha256:" + hash, PayloadHash: hash,
			Outcome: seqboxtype.Rejected, ReceivedAt: now, ProcessedAt: &now, RetentionUntil: now.Add(p.cfg.Retention)})
		if err != nil || !inserted {
			return res, err
		}
	}
	envelope := in.raw
	if envelope == nil {
		envelope = []byte{} // a tombstone (Kafka's nil value): kept as empty bytes
	}
	if _, err := tx.DeadLetterInsert(ctx, store.DeadLetter{
		Seq: in.redrivenSeq(), Consumer: p.cfg.Name, Source: res.Source, ID: res.ID, PartitionKey: res.PartitionKey, Envelope: envelope, PayloadHash: hash,
		Reason: string(seqboxtype.Rejected) + ": " + perr.Error(), Attempts: in.attempt,
		FirstError: perr.Error(), LastError: perr.Error(), DeadAt: now,
	}); err != nil {
		return res, err
	}
	return res, tx.AuditInsert(ctx, store.AuditRow{Consumer: p.cfg.Name, Source: res.Source, ID: res.ID, PartitionKey: res.PartitionKey,
		Outcome: seqboxtype.Rejected, Reason: res.Reason, NextAction: "fix the producer; the bytes are in the DLQ", At: now})
}

// bestEffortIdentity pulls source, id and partitionkey out of an envelope
// that failed validation, for the DLQ row and the CLI line. It reads the
// top-level members one token at a time and skips every other value
// unread, so that what made the envelope invalid elsewhere (a number no
// double holds, data nested past any decoder's depth limit) does not hide
// them. Bytes that are not one JSON object to their end (cut off, or
// followed by more) have none.
func bestEffortIdentity(raw []byte) (source, id, key string) {
	source, id, key, ok := readIdentity(raw)
	if !ok {
		return "", "", ""
	}
	return source, id, key
}

// readIdentity is bestEffortIdentity's walk; ok when raw is one JSON
// object to its end.
func readIdentity(raw []byte) (source, id, key string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", "", false
	}
	found := map[string]*string{"source": &source, "id": &id, "partitionkey": &key}
	seen := map[string]bool{}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return "", "", "", false
		}
		dst, want := found[name.(string)]
		t, err := dec.Token()
		if err != nil {
			return "", "", "", false
		}
		if d, ok := t.(json.Delim); ok {
			if !skipNested(dec, d) {
				return "", "", "", false
			}
			continue
		}
		if s, ok := t.(string); ok && want && !seen[name.(string)] {
			seen[name.(string)] = true
			*dst = attributeText(s)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return "", "", "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", "", false // more after the object
	}
	return source, id, key, true
}

// skipNested reads the rest of the array or object whose opening
// delimiter open was just read, tokens only (no depth limit applies);
// false when the input ends or breaks first.
func skipNested(dec *json.Decoder, open json.Delim) bool {
	depth := 1
	for depth > 0 {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return true
}

// attributeText is an attribute read from a rejected envelope as it may
// be stored and shown: no NUL, at most MaxAttributeSize bytes, valid UTF-8.
func attributeText(s string) string {
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) > seqboxtype.MaxAttributeSize {
		s = s[:seqboxtype.MaxAttributeSize]
	}
	return strings.ToValidUTF8(s, "")
}

// processedAt is when an identity that reached outcome o was processed:
// now for a final outcome, none for one that parks it (held, blocked),
// retries it or stops it to be decided.
func processedAt(o seqboxtype.Outcome, now time.Time) *time.Time {
	switch o {
	case seqboxtype.Held, seqboxtype.Blocked, seqboxtype.Retry, noOutcome, outcomeDeciding:
		return nil
	}
	return &now
}

// record writes the inbox outcome and the audit evidence of a result. A
// message whose outcome is final forgets its attempts, so that nothing is held
// behind a retry that is over.
func (p *pipeline) record(ctx context.Context, tx *batchTx, ev seqboxtype.Event, res seqboxtype.Result, current *int64, next string, now time.Time) error {
	if res.Outcome != seqboxtype.Duplicate && res.Outcome != seqboxtype.Collision {
		if err := tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, Outcome: res.Outcome,
			ProcessedAt: processedAt(res.Outcome, now)}); err != nil {
			return err
		}
	}
	if endsOnKey(res.Outcome) {
		if err := tx.RetryClear(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID}); err != nil {
			return err
		}
	}
	return tx.AuditInsert(ctx, store.AuditRow{
		Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey,
		ReceivedVersion: ev.ObjectVersion, CurrentVersion: current, Outcome: res.Outcome,
		Reason: res.Reason, NextAction: next, At: now, PayloadHash: onceOnly(res.Outcome, ev.Hash),
	})
}

// onceOnly is the payload hash that makes an audit row once-only: for a
// duplicate or a collision, seeing that payload again is no new evidence.
func onceOnly(o seqboxtype.Outcome, hash string) string {
	if o == seqboxtype.Duplicate || o == seqboxtype.Collision {
		return hash
	}
	return ""
}

func (p *pipeline) parkRow(ev seqboxtype.Event, reason seqboxtype.Park, detail string, now, holdUntil time.Time) store.Parked {
	return store.Parked{
		Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey,
		ObjectVersion: ev.ObjectVersion, Reason: reason, Detail: detail, Envelope: ev.Raw,
		PayloadHash: ev.Hash, ParkedAt: now, HoldUntil: holdUntil,
	}
}

func (p *pipeline) isExpired(ev seqboxtype.Event, now time.Time) bool {
	d := p.deadline(ev)
	return !d.IsZero() && now.After(d)
}

// deadline is ev's business deadline: past it, ev is expired (zero: it
// has none).
func (p *pipeline) deadline(ev seqboxtype.Event) time.Time {
	if p.cfg.MaxAge <= 0 || ev.Time.IsZero() {
		return time.Time{}
	}
	return ev.Time.Add(p.cfg.MaxAge)
}

// expiredUndecided reports an event past its business deadline that was
// not decided yet. The deadline is checked before the agent's call, never
// after it: an event whose decision is recorded was sent, and its call
// took effect or may have, so it applies (the decider checks the deadline
// again right before it asks: decideOnce).
func (p *pipeline) expiredUndecided(ctx context.Context, tx *batchTx, ev seqboxtype.Event, now time.Time) (bool, error) {
	if !p.isExpired(ev, now) || p.cfg.Decide == nil {
		return p.isExpired(ev, now), nil
	}
	d, err := tx.DecisionGet(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
	if errors.Is(err, store.ErrNotFound) {
		// A decider's live claim: its call may be running (this copy came
		// back because the first's lease ran out during it), and a call
		// that takes effect applies. The copy goes on to meet the claim
		// and wait for its outcome, keeping its key's turn.
		live, err := tx.DecisionClaimLive(ctx, store.DecisionClaimParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, Now: now})
		if live || err != nil {
			return false, err
		}
		// A call of it took effect or may have, and its caller is gone (a
		// dead decider's pending row, an uncertain one, a success not
		// recorded as a decision): the decider resolves that call, and the
		// ledger makes no new one past the deadline.
		touched, err := tx.LedgerTouched(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
		return !touched && err == nil, err
	}
	return err == nil && !d.MadeFor(ev.Hash), err
}

func (p *pipeline) expiredReason(ev seqboxtype.Event) string {
	return fmt.Sprintf("occurred at %s, past the %s business deadline", ev.Time.Format(time.RFC3339), p.cfg.MaxAge)
}

// lockKey reads and locks a key's state, creating the key first when it is
// new (created): one statement for a key seen before.
func (p *pipeline) lockKey(ctx context.Context, tx *batchTx, key string, now time.Time) (ks store.KeyState, created bool, err error) {
	ks, err = tx.KeyLock(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: key})
	if !errors.Is(err, store.ErrNotFound) {
		return ks, false, err
	}
	if err := tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: p.cfg.Name, Key: key, At: now}); err != nil {
		return ks, false, err
	}
	ks, err = tx.KeyLock(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: key})
	return ks, true, err
}

// rollback undoes a message's writes in a run with savepoints; every
// rollback of a message goes through it. A key row the message created
// (newKey) goes with them, and is created again: the retry row, turn or
// version the message writes next needs it, and a turn without its key's
// row was one `keys release` could not find
// (TestTurnOnANewKeyCanBeReleased).
func (p *pipeline) rollback(ctx context.Context, m *message) error {
	if err := m.tx.SavepointRollback(ctx, m.sp); err != nil || !m.newKey {
		return err
	}
	return m.tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: p.cfg.Name, Key: m.ev.PartitionKey, At: m.now})
}
