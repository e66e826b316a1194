package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// exerciseHardening covers what a hostile review found: a message let out by
// unparking that retries, rejected input delivered again, and operator requests
// executed only by the consumer that owns the handler.
func exerciseHardening(t *testing.T, open Factory) {
	t.Run("UnparkedRetrySweptAfterBackoff", func(t *testing.T) { hardUnparkedRetrySwept(t, open) })
	t.Run("UnparkedRetryAtOnceForRecord", func(t *testing.T) { hardUnparkedRetryAtOnce(t, open) })
	t.Run("RejectedTwiceOneDeadLetter", func(t *testing.T) { hardRejectedTwice(t, open) })
	t.Run("OversizedTwiceOneDeadLetter", func(t *testing.T) { hardOversizedTwice(t, open) })
	t.Run("RegistrationOnFirstDelivery", func(t *testing.T) { hardRegistration(t, open) })
	t.Run("RequestRunsTheOwnersHandler", func(t *testing.T) { hardRequestOwner(t, open) })
	t.Run("RequestTakenOnce", func(t *testing.T) { hardRequestTakenOnce(t, open) })
	t.Run("CancelledRequestNeverRuns", func(t *testing.T) { hardRequestCancelled(t, open) })
	t.Run("SilentTakersRequestFails", func(t *testing.T) { hardRequestSilentTaker(t, open) })
	t.Run("ReplayTwiceAddsNothing", func(t *testing.T) { hardReplayTwice(t, open) })
	t.Run("AmbiguousInputsNeverMerge", func(t *testing.T) { hardAmbiguousInputs(t, open) })
	t.Run("HashComparesByValue", func(t *testing.T) { hardHashByValue(t, open) })
	t.Run("ParkedInLineIsUnparked", func(t *testing.T) { hardParkedInLine(t, open) })
}

// Inputs with more than one meaning have no identity: ids or keys that
// differ only in invalid bytes or lone surrogates are each rejected, never
// merged into one identity where the second is lost as a duplicate.
func hardAmbiguousInputs(t *testing.T, open Factory) {
	b := setupInbox(t, open)
	c := b.consumer()
	for _, raw := range []string{
		"{\"id\":\"a\xff\",\"source\":\"s\",\"type\":\"t\"}",
		"{\"id\":\"a\xfe\",\"source\":\"s\",\"type\":\"t\"}",
		`{"id":"k1","source":"s","type":"t","partitionkey":"P\udc01"}`,
		`{"id":"k2","source":"s","type":"t","partitionkey":"P\udc02"}`,
		`{"id":"d","source":"s","type":"t","data":{"x":{"a":1,"\u0061":2}}}`,
	} {
		res := deliver(t, c, []byte(raw), 1)
		require.Equal(t, seqboxtype.Rejected, res.Outcome, "%q", raw)
		require.NotEmpty(t, res.Reason)
	}
	dlq, _ := countRows(t, b.st, b.cfg.Name)
	require.Equal(t, 5, dlq, "each ambiguous input is its own rejection")
	counts, err := b.st.Executor().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	require.Zero(t, counts.InboxRows)
	require.Zero(t, b.effectCount(""))
}

// The payload hash is RFC 8785: the same fact spelled differently (number
// spelling, escapes, member order, whitespace) is a duplicate, and a
// different value is a collision.
func hardHashByValue(t *testing.T, open Factory) {
	b := setupInbox(t, open)
	c := b.consumer()
	require.Equal(t, seqboxtype.Applied, deliver(t, c, []byte(`{"id":"n","source":"s","type":"t","data":{"q":1,"name":"é"}}`), 1).Outcome)
	for _, same := range []string{
		`{"id":"n","source":"s","type":"t","data":{"q":1.0,"name":"\u00e9"}}`,
		`{"data":{"name":"é","q":1e0},"type":"t","source":"s","id":"n"}`,
		`{ "id" : "n", "source":"s", "type":"t", "data":{"q":10e-1,"name":"é"}, "publishedat":"2026-01-01T00:00:00Z"}`,
	} {
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, []byte(same), 2).Outcome, same)
	}
	require.Equal(t, seqboxtype.Collision, deliver(t, c, []byte(`{"id":"n","source":"s","type":"t","data":{"q":2,"name":"é"}}`), 1).Outcome)
	require.Equal(t, 1, b.effectCount(""))
}

// replayTwiceInput has one line of every kind a replay meets: applied,
// duplicate, collision, semantic duplicate, stale, held then applied,
// dead-lettered, blocked, rejected (bad JSON, duplicate member), blank.
const replayTwiceInput = `{"id":"p1","source":"erp","type":"created","partitionkey":"P","objectversion":1}
{"id":"p1","source":"erp","type":"created","partitionkey":"P","objectversion":1}
{"id":"p1","source":"erp","type":"created","partitionkey":"P","objectversion":1,"data":{"qty":12}}
{"id":"p3","source":"erp","type":"shipped","partitionkey":"P","objectversion":3}
{"id":"p2","source":"erp","type":"paid","partitionkey":"P","objectversion":2,"businesskey":"pay:P"}
{"id":"p2b","source":"erp","type":"paid","partitionkey":"Q","objectversion":1,"businesskey":"pay:P"}
{"id":"p0","source":"erp","type":"draft","partitionkey":"P","objectversion":0}
{"id":"k1","source":"erp","type":"created","partitionkey":"K","objectversion":1,"data":{"fail":"permanent"}}
{"id":"k2","source":"erp","type":"paid","partitionkey":"K","objectversion":2}
{"id":"bad"
{"id":"a","id":"b","source":"erp","type":"t"}

`

// rowCounts counts every table a replay writes, for one consumer.
func rowCounts(t *testing.T, st store.Store, consumer string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"seqbox_inbox", "seqbox_dlq", "seqbox_audit", "seqbox_parked", "seqbox_gaps",
		"seqbox_business_keys", "seqbox_keys", "seqbox_retries", "seqbox_record_effects"} {
		var n int
		require.NoError(t, st.DB().QueryRowContext(context.Background(),
			`SELECT COUNT(*) FROM `+table+` WHERE consumer = $1`, consumer).Scan(&n))
		out[table] = n
	}
	return out
}

// Replaying a file again adds nothing: not to the inbox, the effects, the
// DLQ, the parked messages nor the audit (docs/design.md §17).
func hardReplayTwice(t *testing.T, open Factory) {
	st := open(t)
	ctx := context.Background()
	c, err := replay.NewConsumer(seqbox.Config{Name: "twice", Store: st, Now: func() time.Time { return ordT0 }})
	require.NoError(t, err)
	var first strings.Builder
	cnt, err := replay.Run(ctx, c, st, strings.NewReader(replayTwiceInput), &first, replay.Options{})
	require.NoError(t, err)
	require.Equal(t, int64(11), cnt.Deliveries, "every non-blank line is one delivery:\n%s", first.String())
	for _, o := range []seqboxtype.Outcome{seqboxtype.Duplicate, seqboxtype.Collision, seqboxtype.SemanticDuplicate, seqboxtype.Stale,
		seqboxtype.Held, seqboxtype.DeadLettered, seqboxtype.Blocked, seqboxtype.Rejected} {
		require.NotZero(t, cnt.ByOutcome[o], "the input exercises %s:\n%s", o, first.String())
	}
	before := rowCounts(t, st, "twice")

	var second strings.Builder
	cnt, err = replay.Run(ctx, c, st, strings.NewReader(replayTwiceInput), &second, replay.Options{})
	require.NoError(t, err)
	require.Zero(t, cnt.Accepted, "the second run applies nothing:\n%s", second.String())
	require.Equal(t, int64(2), cnt.ByOutcome[seqboxtype.Rejected], "rejected lines are rejected again")
	require.Equal(t, int64(1), cnt.ByOutcome[seqboxtype.Collision], "the colliding line collides again")
	require.Equal(t, before, rowCounts(t, st, "twice"), "the second run adds no row anywhere")
}

// flakyOnce wraps the record handler: the named event fails transiently
// the first time it runs, then applies.
func flakyOnce(name, id string) (seqbox.Handler, *atomic.Int32) {
	inner := replay.RecordHandler(name)
	var calls atomic.Int32
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if ev.ID == id && calls.Add(1) == 1 {
			return errors.New("flaky: first attempt fails")
		}
		return inner(ctx, tx, ev)
	}, &calls
}

// v1, then v3 (held), then v2: v2's unparking lets v3 out, which fails once.
// The library leaves it held for its backoff, says so in the key's detail,
// and the next sweep after the backoff applies it.
func hardUnparkedRetrySwept(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	h, calls := flakyOnce(e.cfg.Name, "o-3")
	c := e.consumer(func(cfg *seqbox.Config) { cfg.Handler = h })
	const key = "PED-1"
	e.deliver(c, ordEvent("o-1", key, 1, "order.created"), 1)
	require.Equal(t, []string{"o-3:held"}, ordSummary(e.deliver(c, ordEvent("o-3", key, 3, "order.cancelled"), 1)))
	require.Equal(t, []string{"o-2:applied", "o-3:retry"}, ordSummary(e.deliver(c, ordEvent("o-2", key, 2, "order.paid"), 1)))

	parked, err := e.st.Executor().ParkedList(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, seqboxtype.ParkHeld, parked[0].Reason)
	require.Contains(t, parked[0].Detail, "attempt 1 of 3 failed", "the detail says why it waits now, not the old gap text")

	e.clock.Advance(time.Second) // past the backoff
	results, err := c.Sweep(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"o-3:applied"}, ordSummary(results))
	require.EqualValues(t, 2, calls.Load())
	require.Equal(t, []string{"o-1@1 order.created", "o-2@2 order.paid", "o-3@3 order.cancelled"}, e.effects(key))
	v, err := e.st.Executor().KeyViewGet(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(t, err)
	require.Zero(t, v.Held, "nothing is left held")
	require.Equal(t, int64(3), *v.Version)
}

// The same with replay's record handler, whose retries are redelivered at
// once (docs/design.md §17): the unparked v3 fails every time, so it is retried in
// the same pass until dead-lettered, and nothing stays held or retrying.
func hardUnparkedRetryAtOnce(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	cfg := e.cfg
	c, err := replay.NewConsumer(cfg)
	require.NoError(t, err)
	const key = "PED-2"
	e.deliver(c, ordEvent("r-1", key, 1, "order.created"), 1)
	e.deliver(c, ordEvent("r-3", key, 3, "order.cancelled", ordWithData(map[string]any{"fail": "transient"})), 1)
	results := e.deliver(c, ordEvent("r-2", key, 2, "order.paid"), 1)
	require.Equal(t, []string{"r-2:applied", "r-3:retry", "r-3:retry", "r-3:dead_lettered"}, ordSummary(results))
	v, err := e.st.Executor().KeyViewGet(e.ctx, store.KeyRef{Consumer: cfg.Name, Key: key})
	require.NoError(t, err)
	require.Zero(t, v.Held)
	require.True(t, v.Blocked, "on_dead_letter=block: the key waits for an operator")
	letters, err := e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: cfg.Name, All: false})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, "r-3", letters[0].ID)
}

// countRows counts a consumer's DLQ and audit rows.
func countRows(t *testing.T, st store.Store, consumer string) (dlq, audit int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_dlq WHERE consumer = $1`, consumer).Scan(&dlq))
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_audit WHERE consumer = $1`, consumer).Scan(&audit))
	return dlq, audit
}

// A rejected input has the identity of its bytes: delivered again, it is
// rejected again, with a reason, and adds no DLQ or audit row. It is not
// an inbox identity of the business.
func hardRejectedTwice(t *testing.T, open Factory) {
	b := setupInbox(t, open)
	c := b.consumer()
	bad := []byte(`{"id":"x-1","source":"crm","type":"t","objectversion":"one","partitionkey":"K"}`)
	for range 2 {
		res := deliver(t, c, bad, 1)
		require.Equal(t, seqboxtype.Rejected, res.Outcome)
		require.Contains(t, res.Reason, "objectversion", "the reason names the field")
	}
	other := deliver(t, c, []byte(`{"id":"x-1","source":"crm"}`), 1)
	require.Equal(t, seqboxtype.Rejected, other.Outcome, "other bad bytes are another rejection")
	dlq, audit := countRows(t, b.st, b.cfg.Name)
	require.Equal(t, 2, dlq, "one DLQ row per distinct bad input")
	require.Equal(t, 2, audit)
	counts, err := b.st.Executor().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	require.Zero(t, counts.InboxRows, "rejected inputs are not business identities")
}

// An input too large to hand over is one rejected outcome with its size in
// the reason; the DLQ keeps its prefix, once.
func hardOversizedTwice(t *testing.T, open Factory) {
	b := setupInbox(t, open)
	c := b.consumer()
	prefix := []byte(`{"id":"big","source":"crm","type":"t","data":"` + strings.Repeat("a", 100))
	o := seqbox.Oversized{Prefix: prefix, Size: 5 << 20, SHA256: sha256.Sum256([]byte("the whole line"))}
	for range 2 {
		results, err := c.DeliverOversized(context.Background(), o)
		require.NoError(t, err)
		require.Len(t, results, 1)
		require.Equal(t, seqboxtype.Rejected, results[0].Outcome)
		require.Contains(t, results[0].Reason, "5242880 bytes")
	}
	letters, err := b.st.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: b.cfg.Name, All: false})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, prefix, letters[0].Envelope)
}

// A consumer registers on its first delivery with its handler kind and
// policies, so operator commands need no policy flags.
func hardRegistration(t *testing.T, open Factory) {
	b := setupInbox(t, open)
	ctx := context.Background()
	fv := int64(1)
	c := b.consumer(func(cfg *seqbox.Config) { cfg.FirstVersion = &fv; cfg.GapPolicy = seqbox.GapAdvance })
	_, err := b.st.Executor().ConsumerGet(ctx, b.cfg.Name)
	require.ErrorIs(t, err, store.ErrNotFound, "nothing is written before the first delivery")
	deliver(t, c, []byte(`{"id":"a","source":"s","type":"t"}`), 1)
	rec, err := replay.NewConsumer(seqbox.Config{Name: "replayed", Store: b.st})
	require.NoError(t, err)
	_, err = rec.Deliver(ctx, []byte(`{"id":"a","source":"s","type":"t"}`), 1)
	require.NoError(t, err)

	regs, err := b.st.Executor().ConsumerList(ctx)
	require.NoError(t, err)
	require.Len(t, regs, 2)
	require.Equal(t, b.cfg.Name, regs[0].Consumer)
	require.Equal(t, store.HandlerApplication, regs[0].HandlerKind)
	require.True(t, regs[0].HeartbeatAt.IsZero(), "a consumer that never ran has no heartbeat")
	require.Equal(t, "replayed", regs[1].Consumer)
	require.Equal(t, store.HandlerRecord, regs[1].HandlerKind)
	pol, err := seqbox.RegisteredPolicies(regs[0])
	require.NoError(t, err)
	require.Equal(t, seqbox.GapAdvance, pol.GapPolicy)
	require.Equal(t, int64(1), *pol.FirstVersion)
	cfg := seqbox.Config{Policies: pol}
	require.Equal(t, 5*time.Minute, cfg.HoldTimeout)
}

// appSetup is an application's consumer: its own table and handler, which
// fails permanently while broken is set.
func appSetup(t *testing.T, st store.Store, name string, broken *atomic.Bool) *seqbox.Consumer {
	t.Helper()
	ctx := context.Background()
	_, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS app_tasks (consumer TEXT NOT NULL, id TEXT NOT NULL)`)
	require.NoError(t, err)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: name, Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			if broken.Load() {
				return seqbox.Permanent(errors.New("crm is down"))
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO app_tasks (consumer, id) VALUES ($1, $2)`, name, ev.ID)
			return err
		}})
	require.NoError(t, err)
	return c
}

func appTasks(t *testing.T, st store.Store, name string) int {
	t.Helper()
	var n int
	require.NoError(t, st.DB().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM app_tasks WHERE consumer = $1`, name).Scan(&n))
	return n
}

// deadLetterOne dead-letters one keyed message through c and returns its
// DLQ sequence number.
func deadLetterOne(t *testing.T, c *seqbox.Consumer, st store.Store, id string) int64 {
	t.Helper()
	res := deliver(t, c, []byte(`{"id":"`+id+`","source":"crm","type":"task.create","partitionkey":"opp-1","objectversion":1}`), 1)
	require.Equal(t, seqboxtype.DeadLettered, res.Outcome)
	letters, err := st.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: c.Name(), All: false})
	require.NoError(t, err)
	require.NotEmpty(t, letters)
	return letters[len(letters)-1].Seq
}

// fixedAfterDeadLetter is an application consumer "crm" whose handler
// dead-lettered message id while broken, and now works again.
func fixedAfterDeadLetter(t *testing.T, open Factory, id string) (store.Store, *seqbox.Consumer, int64) {
	t.Helper()
	st := open(t)
	var broken atomic.Bool
	broken.Store(true)
	c := appSetup(t, st, "crm", &broken)
	seq := deadLetterOne(t, c, st, id)
	broken.Store(false)
	return st, c, seq
}

// A redrive request runs through the owner's handler: the application's
// table gets the effect, who asked is recorded, and the result carries
// the results.
func hardRequestOwner(t *testing.T, open Factory) {
	st, c, seq := fixedAfterDeadLetter(t, open, "t-1")
	ctx := context.Background()

	req, err := st.Executor().RequestInsert(ctx, store.OperatorRequest{Consumer: "crm", Action: store.ActionRedrive,
		Target: itoa(seq), RequestedBy: "alice", Reason: "crm is back", RequestedAt: time.Now()})
	require.NoError(t, err)
	n, err := c.RunRequests(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r, err := st.Executor().RequestGet(ctx, req)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.RequestDone, r.State, r.Error)
	require.Equal(t, "alice", r.RequestedBy)
	require.NotEmpty(t, r.TakenBy)
	var results []seqboxtype.Result
	require.NoError(t, json.Unmarshal(r.Result, &results))
	require.Equal(t, seqboxtype.Applied, results[0].Outcome)
	require.Equal(t, 1, appTasks(t, st, "crm"))

	// A request the consumer cannot honour fails with the reason.
	bad, err := st.Executor().RequestInsert(ctx, store.OperatorRequest{Consumer: "crm", Action: store.ActionRedrive,
		Target: itoa(seq), RequestedBy: "alice", RequestedAt: time.Now()})
	require.NoError(t, err)
	_, err = c.RunRequests(ctx)
	require.NoError(t, err)
	r, err = st.Executor().RequestGet(ctx, bad)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.RequestFailed, r.State)
	require.Contains(t, r.Error, "already resolved")
	require.Equal(t, 1, appTasks(t, st, "crm"), "nothing applied twice")
}

// Two processes of one consumer race for a request: one executes it.
func hardRequestTakenOnce(t *testing.T, open Factory) {
	st := open(t)
	ctx := context.Background()
	var broken atomic.Bool
	broken.Store(true)
	a := appSetup(t, st, "crm", &broken)
	b := appSetup(t, st, "crm", &broken)
	seq := deadLetterOne(t, a, st, "t-2")
	broken.Store(false)
	_, err := st.Executor().RequestInsert(ctx, store.OperatorRequest{Consumer: "crm", Action: store.ActionRedrive,
		Target: itoa(seq), RequestedBy: "bob", RequestedAt: time.Now()})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var ran atomic.Int32
	errs := make(chan error, 2)
	for _, c := range []*seqbox.Consumer{a, b} {
		wg.Go(func() {
			n, err := c.RunRequests(ctx)
			if err != nil {
				errs <- err
			}
			ran.Add(int32(n))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, ran.Load())
	require.Equal(t, 1, appTasks(t, st, "crm"))
}

// A request whose taker fell silent (a process killed while it ran the
// request: its heartbeat on the request stopped) fails, naming the taker,
// once a live consumer of its name has watched its sign of life stay
// unchanged for LiveWithin, by its own clock: it no longer stays running
// for ever while the CLI says "it may still finish". Not run again: a
// taker that died running it may have died of it. A taker that renews it
// is left alone however long it runs, and so is a request taken by a
// seqbox that kept no sign of life.
func hardRequestSilentTaker(t *testing.T, open Factory) {
	st, _, seq := fixedAfterDeadLetter(t, open, "t-5")
	ctx := context.Background()
	ex := st.Executor()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "crm", Store: st, Now: func() time.Time { return time.Unix(0, clock.Load()) },
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }})
	require.NoError(t, err)
	claimed := func(taker string) int64 {
		t.Helper()
		req, err := ex.RequestInsert(ctx, store.OperatorRequest{Consumer: "crm", Action: store.ActionRedrive,
			Target: itoa(seq), RequestedBy: "dave", Reason: "crm is back", RequestedAt: time.Now()})
		require.NoError(t, err)
		ok, err := ex.RequestClaim(ctx, store.RequestClaimParams{Seq: req, Taker: taker, At: time.Now()})
		require.NoError(t, err)
		require.True(t, ok)
		return req
	}
	state := func(req int64) store.OperatorRequest {
		t.Helper()
		r, err := ex.RequestGet(ctx, req)
		require.NoError(t, err)
		return r
	}
	runRequests := func() {
		t.Helper()
		n, err := c.RunRequests(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "none is run here")
	}
	renew := func(req int64, taker string) bool {
		t.Helper()
		ok, err := ex.RequestAlive(ctx, store.RequestAliveParams{Seq: req, Taker: taker, At: time.Unix(0, clock.Load())})
		require.NoError(t, err)
		return ok
	}
	silent, alive, old := claimed("killed-host:41"), claimed("slow-host:42"), claimed("old-host:43")
	_, err = st.DB().ExecContext(ctx, `UPDATE seqbox_requests SET alive_at = NULL WHERE seq = $1`, old)
	require.NoError(t, err)
	require.True(t, renew(alive, "slow-host:42"), "its own running request")
	require.False(t, renew(alive, "another:1"), "not another's")

	runRequests() // first sight of each
	advance(10 * time.Second)
	require.True(t, renew(alive, "slow-host:42"))
	runRequests()
	advance(6 * time.Second)
	runRequests() // the silent one unchanged for 16 s; the other renewed 6 s ago
	r := state(silent)
	require.Equal(t, seqboxtype.RequestFailed, r.State)
	require.Contains(t, r.Error, "killed-host:41")
	require.Contains(t, r.Error, "run the command again")
	require.False(t, r.DoneAt.IsZero())
	require.Equal(t, seqboxtype.RequestRunning, state(alive).State, "its taker renews it")
	require.Equal(t, seqboxtype.RequestRunning, state(old).State, "taken by a seqbox that kept no sign of life")
	require.False(t, renew(silent, "killed-host:41"), "a failed request is not alive again")
	require.ErrorIs(t, ex.RequestFinish(ctx, store.RequestFinishParams{Seq: silent, State: seqboxtype.RequestDone, At: time.Now()}),
		store.ErrNotFound, "nor finished by its taker come back")

	advance(16 * time.Second) // the other falls silent too
	runRequests()
	advance(16 * time.Second)
	runRequests()
	require.Equal(t, seqboxtype.RequestFailed, state(alive).State, "silent since its last renewal")
	require.Equal(t, seqboxtype.RequestRunning, state(old).State)
	require.Zero(t, appTasks(t, st, "crm"), "nothing ran")
}

// A request withdrawn before any consumer took it never runs.
func hardRequestCancelled(t *testing.T, open Factory) {
	st, c, seq := fixedAfterDeadLetter(t, open, "t-3")
	ctx := context.Background()
	req, err := st.Executor().RequestInsert(ctx, store.OperatorRequest{Consumer: "crm", Action: store.ActionSkip,
		Target: itoa(seq), RequestedBy: "carol", Reason: "wrong", RequestedAt: time.Now()})
	require.NoError(t, err)
	ok, err := st.Executor().RequestCancel(ctx, store.RequestCancelParams{Seq: req, Why: "nobody took it", At: time.Now()})
	require.NoError(t, err)
	require.True(t, ok)
	n, err := c.RunRequests(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	letter, err := st.Executor().DeadLetterGet(ctx, store.DeadLetterRef{Consumer: "crm", Seq: seq})
	require.NoError(t, err)
	require.Empty(t, letter.Resolution, "the skip never ran")
	ok, err = st.Executor().RequestCancel(ctx, store.RequestCancelParams{Seq: req, Why: "again", At: time.Now()})
	require.NoError(t, err)
	require.False(t, ok, "a cancelled request is no longer pending")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A message parked by a transaction that held the key while another waited
// for it is seen by the waiter: v4 is parked (a gap) in a batch that keeps
// the key locked, v3 waits for the lock, and when v3 applies it must unpark
// v4. (On PostgreSQL the waiter's snapshot predates the park: what it
// knows of the key's parked messages must be read after the lock.)
func hardParkedInLine(t *testing.T, open Factory) {
	const k = "PED-W"
	watch := newWaitWatch(k, 1)
	e := ordSetup(t, watch.wrap(open))
	inHandler, release := make(chan struct{}), make(chan struct{})
	inner := replay.RecordHandler(e.cfg.Name)
	c := e.consumer(func(cfg *seqbox.Config) {
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			if ev.ID == "slow" {
				close(inHandler)
				<-release
			}
			return inner(ctx, tx, ev)
		}
	})
	e.deliver(c, ordEvent("w1", k, 1, "created"), 1)
	e.deliver(c, ordEvent("w2", k, 2, "paid"), 1)

	batchDone := make(chan error, 1)
	go func() {
		// v4 parks (held: v3 is missing) and the batch goes on to a slow
		// handler on another key, keeping v4's key locked.
		_, err := c.DeliverBatch(e.ctx, [][]byte{ordEvent("w4", k, 4, "delivered"), ordEvent("slow", "OTHER", 1, "x")})
		batchDone <- err
	}()
	<-inHandler
	watch.armed.Store(true) // the next transaction to begin is v3's
	v3Done := make(chan []seqboxtype.Result, 1)
	go func() {
		results, err := c.Deliver(e.ctx, ordEvent("w3", k, 3, "shipped"), 1)
		if err != nil {
			results = []seqboxtype.Result{{ID: "error: " + err.Error()}}
		}
		v3Done <- results
	}()
	require.NoError(t, watch.wait(), "v3 never went for the key")
	close(release)
	require.NoError(t, <-batchDone)
	results := <-v3Done
	require.Equal(t, []string{"w3:applied", "w4:applied"}, ordSummary(results), "v3 drains the v4 parked while it waited")
	require.Equal(t, []string{"w1@1 created", "w2@2 paid", "w3@3 shipped", "w4@4 delivered"}, e.effects(k))
}
