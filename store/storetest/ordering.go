package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// exerciseOrdering runs the ordering scenarios of the seed ("Teste as
// inversões antes da produção") against a store, through the public
// pipeline only. Every scenario checks the business result, not just the
// log: final object state and version, the effects in commit order, the
// accepted and refused messages with their outcomes, and the audit
// evidence.
func exerciseOrdering(t *testing.T, open Factory) {
	t.Run("InOrder", func(t *testing.T) { ordInOrder(t, open) })
	t.Run("OutOfOrder132", func(t *testing.T) { ordOutOfOrder(t, open) })
	t.Run("DuplicateVersion", func(t *testing.T) { ordDuplicate(t, open) })
	t.Run("MissingVersionHeld", func(t *testing.T) { ordMissingVersion(t, open) })
	t.Run("GapPolicyAdvance", func(t *testing.T) { ordGapAdvance(t, open) })
	t.Run("PermanentFailureBlock", func(t *testing.T) { ordPermanentBlock(t, open) })
	t.Run("PermanentFailureRelease", func(t *testing.T) { ordPermanentRelease(t, open) })
	t.Run("TransientFailureNeverOvertaken", func(t *testing.T) { ordTransient(t, open) })
	t.Run("RestartDuringVersion3", func(t *testing.T) { ordRestart(t, open) })
	t.Run("LostWriteConfirmation", func(t *testing.T) { ordLostConfirmation(t, open) })
	t.Run("TwoProducersOneKey", func(t *testing.T) { ordTwoProducers(t, open) })
	t.Run("HotKey", func(t *testing.T) { ordHotKey(t, open) })
	t.Run("BusinessDeadline", func(t *testing.T) { ordDeadline(t, open) })
	t.Run("PersonEditsObject", func(t *testing.T) { ordPersonEdits(t, open) })
	t.Run("FirstVersion", func(t *testing.T) { ordFirstVersion(t, open) })
	t.Run("StringObjectVersion", func(t *testing.T) { ordStringVersion(t, open) })
	t.Run("MaxBlock", func(t *testing.T) { ordMaxBlock(t, open) })
	t.Run("PED4821", func(t *testing.T) { ordPED4821(t, open) })
	t.Run("OpportunityRepublished", func(t *testing.T) { ordOpportunity(t, open) })
	t.Run("Property", func(t *testing.T) { exerciseOrderingProperty(t, open) })
}

// ---------------------------------------------------------------------------
// helpers (prefixed ord so they cannot clash with the inbox suite)

// ordT0 is the scenarios' fixed start time (the seed's PED-4821 day).
var ordT0 = time.Date(2026, 9, 25, 12, 0, 0, 0, time.UTC)

const ordSource = "erp_pedidos"

// ordClock is a controllable Config.Now.
type ordClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ordClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *ordClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ordEnv is one scenario's store, clock and base configuration.
type ordEnv struct {
	t     *testing.T
	ctx   context.Context
	st    store.Store
	clock *ordClock
	logs  *ordLog
	cfg   seqbox.Config
}

// ordLog collects what consumers log, for the alerts a scenario expects.
type ordLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *ordLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *ordLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// ordSetup opens a fresh store with the record handler's tables and a base
// configuration; mutators adjust the configuration.
func ordSetup(t *testing.T, open Factory, mutate ...func(*seqbox.Config)) *ordEnv {
	t.Helper()
	return ordSetupOn(t, open(t), "ordering", mutate...)
}

// ordSetupOn is ordSetup on an existing store, for a consumer of its own.
func ordSetupOn(t *testing.T, st store.Store, name string, mutate ...func(*seqbox.Config)) *ordEnv {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	clock := &ordClock{t: ordT0}
	logs := &ordLog{}
	e := &ordEnv{t: t, ctx: ctx, st: st, clock: clock, logs: logs, cfg: seqbox.Config{
		Name:        name,
		Store:       st,
		Handler:     replay.RecordHandler(name),
		Retry:       seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
		HoldTimeout: time.Minute,
		Now:         clock.Now,
		Logger:      slog.New(slog.NewTextHandler(logs, nil)),
	}}
	for _, m := range mutate {
		m(&e.cfg)
	}
	return e
}

// consumer builds a consumer from the base configuration plus mutators.
func (e *ordEnv) consumer(mutate ...func(*seqbox.Config)) *seqbox.Consumer {
	e.t.Helper()
	cfg := e.cfg
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(e.t, err)
	return c
}

// deliver runs one message and requires the pipeline not to fail.
func (e *ordEnv) deliver(c *seqbox.Consumer, raw []byte, attempt int) []seqbox.Decision {
	e.t.Helper()
	ds, err := c.Deliver(e.ctx, raw, attempt)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, ds)
	for _, d := range ds {
		require.True(e.t, d.Outcome.Valid(), "outcome %q is not in the closed set", d.Outcome)
	}
	return ds
}

// ordAttr adjusts an envelope.
type ordAttr func(map[string]any)

func ordWithSource(s string) ordAttr { return func(m map[string]any) { m["source"] = s } }
func ordWithTime(t time.Time) ordAttr {
	return func(m map[string]any) { m["time"] = t.UTC().Format(time.RFC3339) }
}
func ordWithData(d map[string]any) ordAttr { return func(m map[string]any) { m["data"] = d } }
func ordWithAttr(k string, v any) ordAttr  { return func(m map[string]any) { m[k] = v } }
func ordFailPermanent() ordAttr            { return ordWithData(map[string]any{"fail": "permanent"}) }

// ordEvent builds a structured-mode CloudEvent for key at version (an
// int, an int64 or a string; nil for none).
func ordEvent(id, key string, version any, typ string, attrs ...ordAttr) []byte {
	m := map[string]any{"specversion": "1.0", "id": id, "source": ordSource, "type": typ}
	if key != "" {
		m["partitionkey"] = key
	}
	if version != nil {
		m["objectversion"] = version
	}
	for _, a := range attrs {
		a(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return raw
}

func ordV(v int64) *int64 { return &v }

// ordSummary renders decisions as "id:outcome".
func ordSummary(ds []seqbox.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID + ":" + string(d.Outcome)
	}
	return out
}

func ordVer(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// effects lists the record handler's effects of key (all keys when empty)
// in commit order, as "id@version type".
func (e *ordEnv) effects(key string) []string {
	e.t.Helper()
	q := `SELECT id, objectversion, type FROM record_effects WHERE consumer = $1 ORDER BY n`
	args := []any{e.cfg.Name}
	if key != "" {
		q = `SELECT id, objectversion, type FROM record_effects WHERE consumer = $1 AND partitionkey = $2 ORDER BY n`
		args = append(args, key)
	}
	rows, err := e.st.DB().QueryContext(e.ctx, q, args...)
	require.NoError(e.t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id, typ string
		var v *int64
		require.NoError(e.t, rows.Scan(&id, &v, &typ))
		out = append(out, fmt.Sprintf("%s@%s %s", id, ordVer(v), typ))
	}
	require.NoError(e.t, rows.Err())
	return out
}

// object returns the record handler's state and version of key, or
// ("", nil) when the handler never applied anything to it.
func (e *ordEnv) object(key string) (string, *int64) {
	e.t.Helper()
	var state string
	var v *int64
	err := e.st.DB().QueryRowContext(e.ctx, `SELECT state, version FROM record_objects WHERE consumer = $1 AND partitionkey = $2`,
		e.cfg.Name, key).Scan(&state, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	require.NoError(e.t, err)
	return state, v
}

// requireObject checks the business object's final state and version, and
// that the pipeline's key version agrees.
func (e *ordEnv) requireObject(key, state string, version int64) {
	e.t.Helper()
	s, v := e.object(key)
	require.Equal(e.t, state, s, "object %s state", key)
	require.Equal(e.t, ordVer(&version), ordVer(v), "object %s version", key)
	kv := e.key(key)
	require.Equal(e.t, ordVer(&version), ordVer(kv.Version), "key %s version", key)
}

func (e *ordEnv) key(key string) store.KeyView {
	e.t.Helper()
	kv, err := e.st.Operator().Key(e.ctx, e.cfg.Name, key)
	require.NoError(e.t, err, "key %s", key)
	return kv
}

// requireKey checks a key's ordering state and what is parked behind it.
func (e *ordEnv) requireKey(key string, version *int64, blocked bool, held, blockedCount int) store.KeyView {
	e.t.Helper()
	kv := e.key(key)
	require.Equal(e.t, ordVer(version), ordVer(kv.Version), "key %s version", key)
	require.Equal(e.t, blocked, kv.Blocked, "key %s blocked", key)
	require.Equal(e.t, held, kv.Held, "key %s held", key)
	require.Equal(e.t, blockedCount, kv.BlockedCount, "key %s blocked messages", key)
	return kv
}

func (e *ordEnv) audit(key string) []store.AuditRow {
	e.t.Helper()
	rows, err := e.st.Operator().Audit(e.ctx, e.cfg.Name, key, 1000)
	require.NoError(e.t, err)
	return rows
}

// auditLines renders a key's audit rows as "id outcome received/current".
// A duplicate is decided by the inbox before the ordering gate reads the
// key, so only its received version is part of its evidence.
func (e *ordEnv) auditLines(key string) []string {
	e.t.Helper()
	out := []string{}
	for _, a := range e.audit(key) {
		require.Equal(e.t, e.cfg.Name, a.Consumer)
		if a.Outcome == string(seqbox.Duplicate) {
			out = append(out, fmt.Sprintf("%s %s %s", a.ID, a.Outcome, ordVer(a.ReceivedVersion)))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", a.ID, a.Outcome, ordVer(a.ReceivedVersion), ordVer(a.CurrentVersion)))
	}
	return out
}

// auditRow returns the last audit row of id with outcome.
func (e *ordEnv) auditRow(key, id string, outcome seqbox.Outcome) store.AuditRow {
	e.t.Helper()
	var found *store.AuditRow
	for _, a := range e.audit(key) {
		if a.ID == id && a.Outcome == string(outcome) {
			a := a
			found = &a
		}
	}
	require.NotNil(e.t, found, "no %s audit row for %s", outcome, id)
	require.Equal(e.t, key, found.PartitionKey)
	require.NotEmpty(e.t, found.Reason, "audit row of %s %s has no reason", id, outcome)
	require.NotEmpty(e.t, found.NextAction, "audit row of %s %s has no next action", id, outcome)
	require.False(e.t, found.At.IsZero())
	return *found
}

// gapLines renders a key's recorded gaps as "from-to by who: why".
func (e *ordEnv) gapLines(key string) []string {
	e.t.Helper()
	gs, err := e.st.Operator().Gaps(e.ctx, e.cfg.Name, key)
	require.NoError(e.t, err)
	out := []string{}
	for _, g := range gs {
		require.Equal(e.t, key, g.Key)
		out = append(out, fmt.Sprintf("%d-%d by %s", g.FromVersion, g.ToVersion, g.DecidedBy))
	}
	return out
}

func (e *ordEnv) gaps(key string) []store.Gap {
	e.t.Helper()
	gs, err := e.st.Operator().Gaps(e.ctx, e.cfg.Name, key)
	require.NoError(e.t, err)
	return gs
}

func (e *ordEnv) counts() store.Counts {
	e.t.Helper()
	c, err := e.st.Operator().Counts(e.ctx, e.cfg.Name)
	require.NoError(e.t, err)
	return c
}

func (e *ordEnv) parked(key string) []store.Parked {
	e.t.Helper()
	ps, err := e.st.Operator().Parked(e.ctx, e.cfg.Name, key)
	require.NoError(e.t, err)
	return ps
}

func (e *ordEnv) deadLetters(all bool) []store.DeadLetter {
	e.t.Helper()
	ds, err := e.st.Operator().DeadLetters(e.ctx, e.cfg.Name, all)
	require.NoError(e.t, err)
	return ds
}

// requireNothingParked checks that no held or blocked message was lost or
// left behind.
func (e *ordEnv) requireNothingParked() {
	e.t.Helper()
	c := e.counts()
	require.Zero(e.t, c.Parked, "parked messages left: %+v", e.parked(""))
	require.Zero(e.t, c.Held)
	require.Zero(e.t, c.Blocked)
}

// ordHandler wraps the record handler to fail chosen identities on
// purpose: permanently until fixed, or transiently on their first attempt.
type ordHandler struct {
	mu            sync.Mutex
	next          seqbox.Handler
	permanent     map[string]bool
	transientOnce map[string]bool
	calls         map[string]int
}

func newOrdHandler(consumer string) *ordHandler {
	return &ordHandler{next: replay.RecordHandler(consumer), permanent: map[string]bool{},
		transientOnce: map[string]bool{}, calls: map[string]int{}}
}

func (h *ordHandler) failPermanently(id string) { h.mu.Lock(); h.permanent[id] = true; h.mu.Unlock() }
func (h *ordHandler) fix(id string)             { h.mu.Lock(); delete(h.permanent, id); h.mu.Unlock() }
func (h *ordHandler) failOnce(id string)        { h.mu.Lock(); h.transientOnce[id] = true; h.mu.Unlock() }

func (h *ordHandler) handle(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
	h.mu.Lock()
	h.calls[ev.ID]++
	perm := h.permanent[ev.ID]
	once := h.transientOnce[ev.ID]
	delete(h.transientOnce, ev.ID)
	h.mu.Unlock()
	if perm {
		return seqbox.Permanent(fmt.Errorf("ordering test: %s is broken", ev.ID))
	}
	if once {
		return fmt.Errorf("ordering test: %s failed transiently", ev.ID)
	}
	return h.next(ctx, tx, ev)
}

// ordCrasher is a Config.Faults hook that crashes once at an armed point.
type ordCrasher struct {
	mu    sync.Mutex
	point seqbox.FaultPoint
	fired int
}

func (c *ordCrasher) arm(p seqbox.FaultPoint) { c.mu.Lock(); c.point = p; c.mu.Unlock() }

func (c *ordCrasher) hook(p seqbox.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.point != "" && p == c.point {
		c.point = ""
		c.fired++
		return fmt.Errorf("ordering test at %s: %w", p, seqbox.ErrCrash)
	}
	return nil
}

// ---------------------------------------------------------------------------
// scenarios

// versions 1, 2 and 3 arrive in sequence.
func ordInOrder(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1001"
	require.Equal(t, []string{"E1:applied"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)))
	require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)))
	require.Equal(t, []string{"E3:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 1)))

	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
	e.requireObject(k, "pedido_enviado", 3)
	e.requireKey(k, ordV(3), false, 0, 0)
	require.Empty(t, e.auditLines(k), "an applied outcome needs no audit evidence")
	require.Empty(t, e.gapLines(k))
	c2 := e.counts()
	require.Equal(t, int64(3), c2.InboxRows)
	require.Equal(t, int64(3), c2.Applied)
	require.Equal(t, int64(1), c2.Keys)
	e.requireNothingParked()
}

// versions 1, 3 and 2: 3 is held, then applied in the same pass as 2.
func ordOutOfOrder(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1002"
	require.Equal(t, []string{"E1:applied"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)))

	ds := e.deliver(c, ordEvent("E3", k, 3, "pedido_cancelado"), 1)
	require.Equal(t, []string{"E3:held"}, ordSummary(ds))
	require.Contains(t, ds[0].Reason, "waiting for version 2 (got 3)")
	kv := e.requireKey(k, ordV(1), false, 1, 0)
	require.Equal(t, "3", ordVer(kv.NextVersion))
	ps := e.parked(k)
	require.Len(t, ps, 1)
	require.Equal(t, "E3", ps[0].ID)
	require.Equal(t, store.ParkHeld, ps[0].Reason)
	require.Equal(t, ordT0.Add(time.Minute), ps[0].HoldUntil.UTC(), "hold deadline = now + HoldTimeout")
	require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k), "a held event has no effect yet")
	require.Equal(t, int64(1), e.counts().Held)

	ds = e.deliver(c, ordEvent("E2", k, 2, "endereco_alterado"), 1)
	require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(ds))
	require.Equal(t, "2", ordVer(ds[0].ObjectVersion))
	require.Equal(t, "3", ordVer(ds[1].ObjectVersion))

	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 endereco_alterado", "E3@3 pedido_cancelado"}, e.effects(k))
	e.requireObject(k, "pedido_cancelado", 3)
	e.requireKey(k, ordV(3), false, 0, 0)
	require.Equal(t, []string{"E3 held 3/1"}, e.auditLines(k))
	a := e.auditRow(k, "E3", seqbox.Held)
	require.Contains(t, a.Reason, "waiting for version 2")
	require.Contains(t, a.NextAction, "released when version 2 arrives")
	require.Empty(t, e.gapLines(k))
	require.Equal(t, int64(3), e.counts().Applied)
	e.requireNothingParked()
}

// version 2 arrives twice (and a held version arrives twice).
func ordDuplicate(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1003"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e2 := ordEvent("E2", k, 2, "pedido_pago")
	require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, e2, 1)))

	ds := e.deliver(c, e2, 2)
	require.Equal(t, []string{"E2:duplicate"}, ordSummary(ds))
	require.Contains(t, ds[0].Reason, "applied")
	// The same fact republished with a new publishedat is still the same.
	ds = e.deliver(c, ordEvent("E2", k, 2, "pedido_pago", ordWithAttr("publishedat", "2026-09-25T12:09:00Z")), 1)
	require.Equal(t, []string{"E2:duplicate"}, ordSummary(ds))

	// A redelivery of a held event is a duplicate too: its identity was
	// recorded when it was parked, and it must not be parked twice.
	e4 := ordEvent("E4", k, 4, "pedido_enviado")
	require.Equal(t, []string{"E4:held"}, ordSummary(e.deliver(c, e4, 1)))
	ds = e.deliver(c, e4, 2)
	require.Equal(t, []string{"E4:duplicate"}, ordSummary(ds))
	require.Contains(t, ds[0].Reason, "held")
	e.requireKey(k, ordV(2), false, 1, 0)

	require.Equal(t, []string{"E3:applied", "E4:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)))
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_separado", "E4@4 pedido_enviado"}, e.effects(k),
		"every version has exactly one effect, in version order")
	e.requireObject(k, "pedido_enviado", 4)
	require.Equal(t, []string{"E2 duplicate 2", "E2 duplicate 2", "E4 held 4/2", "E4 duplicate 4"}, e.auditLines(k))
	cn := e.counts()
	require.Equal(t, int64(4), cn.InboxRows)
	require.Equal(t, int64(4), cn.Applied)
	e.requireNothingParked()
}

// version 4 arrives without 3: held until 3 arrives or HoldTimeout passes.
func ordMissingVersion(t *testing.T, open Factory) {
	const k = "PED-1004"
	start := func(t *testing.T, expiry seqbox.HoldExpiry) (*ordEnv, *seqbox.Consumer) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = expiry })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)
		ds := e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)
		require.Equal(t, []string{"E4:held"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, "waiting for version 3 (got 4)")
		e.requireKey(k, ordV(2), false, 1, 0)

		// Before the deadline the sweeper leaves the hold alone.
		e.clock.Advance(30 * time.Second)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, ds)
		e.requireKey(k, ordV(2), false, 1, 0)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))
		e.clock.Advance(31 * time.Second) // past HoldTimeout (1m)
		return e, c
	}

	t.Run("ArrivesBeforeTimeout", func(t *testing.T) {
		e, c := start(t, seqbox.HoldExpiryBlock)
		require.Equal(t, []string{"E3:applied", "E4:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)))
		e.requireObject(k, "pedido_enviado", 4)
		require.Empty(t, e.gapLines(k))
		e.requireNothingParked()
	})

	t.Run("HoldExpiryBlock", func(t *testing.T) {
		e, c := start(t, seqbox.HoldExpiryBlock)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, ds, "blocking applies nothing")
		kv := e.requireKey(k, ordV(2), true, 0, 1)
		require.Empty(t, kv.BlockedID, "a gap block is behind no message")
		require.Contains(t, kv.BlockedReason, "hold timed out after 1m0s waiting before version 4")
		ps := e.parked(k)
		require.Len(t, ps, 1)
		require.Equal(t, store.ParkBlocked, ps[0].Reason)
		require.Equal(t, "E4", ps[0].ID)
		require.Equal(t, int64(1), e.counts().Blocked)
		stuck, err := e.st.Operator().Keys(e.ctx, e.cfg.Name, true)
		require.NoError(t, err)
		require.Len(t, stuck, 1)
		require.Equal(t, k, stuck[0].Key)

		// Successors park as blocked; a redelivery of 4 is a duplicate.
		ds = e.deliver(c, ordEvent("E5", k, 5, "pedido_entregue"), 1)
		require.Equal(t, []string{"E5:blocked"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, "hold timed out")
		require.Equal(t, []string{"E4:duplicate"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 2)))
		e.requireKey(k, ordV(2), true, 0, 2)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))

		_, err = c.ReleaseKey(e.ctx, k, "", "")
		require.Error(t, err, "a release must say who and why")
		ds, err = c.ReleaseKey(e.ctx, k, "ana@ops", "version 3 confirmed lost at the source")
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied", "E5:applied"}, ordSummary(ds))
		require.Equal(t, []string{"3-3 by ana@ops"}, e.gapLines(k))
		require.Equal(t, "version 3 confirmed lost at the source", e.gaps(k)[0].Reason)
		e.requireObject(k, "pedido_entregue", 5)
		e.requireKey(k, ordV(5), false, 0, 0)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E4@4 pedido_enviado", "E5@5 pedido_entregue"}, e.effects(k))

		// 3 turns up after the decision: too late.
		ds = e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)
		require.Equal(t, []string{"E3:stale"}, ordSummary(ds))
		require.Equal(t, []string{"E4 held 4/2", "E5 blocked 5/2", "E4 duplicate 4", "E3 stale 3/5"}, e.auditLines(k))
		_, err = c.ReleaseKey(e.ctx, k, "ana@ops", "again")
		require.Error(t, err, "the key is no longer blocked")
		e.requireNothingParked()
	})

	t.Run("HoldExpiryAdvance", func(t *testing.T) {
		e, c := start(t, seqbox.HoldExpiryAdvance)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied"}, ordSummary(ds))
		gs := e.gaps(k)
		require.Equal(t, []string{"3-3 by hold_expiry=advance"}, e.gapLines(k))
		require.Contains(t, gs[0].Reason, "hold timed out")
		e.requireObject(k, "pedido_enviado", 4)
		e.requireKey(k, ordV(4), false, 0, 0)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))

		ds = e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)
		require.Equal(t, []string{"E3:stale"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, "version 3 is older than the committed version 4")
		require.Equal(t, []string{"E4 held 4/2", "E3 stale 3/4"}, e.auditLines(k))
		ds, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, ds)
		e.requireNothingParked()
	})
}

// GapPolicy=advance: 4 applies at once with a recorded gap.
func ordGapAdvance(t *testing.T, open Factory) {
	e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
	c := e.consumer()
	const k = "PED-1005"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)
	require.Equal(t, []string{"E4:applied"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
	require.Equal(t, []string{"3-3 by gap_policy=advance"}, e.gapLines(k))
	require.Contains(t, e.gaps(k)[0].Reason, "version 4 arrived while 3 was expected")
	e.requireObject(k, "pedido_enviado", 4)

	ds := e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)
	require.Equal(t, []string{"E3:stale"}, ordSummary(ds))
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
	require.Equal(t, []string{"E3 stale 3/4"}, e.auditLines(k))
	require.Contains(t, e.auditRow(k, "E3", seqbox.Stale).NextAction, "none")
	e.requireNothingParked()
}

// version 2 fails permanently with OnDeadLetter=block.
func ordPermanentBlock(t *testing.T, open Factory) {
	const k, other = "PED-1006", "PED-2000"

	t.Run("RedriveAfterFix", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		h.failPermanently("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })

		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "endereco_alterado")
		ds := e.deliver(c, raw2, 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, "permanent failure")
		kv := e.requireKey(k, ordV(1), true, 0, 0)
		require.Equal(t, ordSource, kv.BlockedSource)
		require.Equal(t, "E2", kv.BlockedID)
		require.Contains(t, kv.BlockedReason, "dead-lettered E2")

		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		require.Equal(t, []string{"E4:blocked"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		e.requireKey(k, ordV(1), true, 0, 2)
		for _, p := range e.parked(k) {
			require.Equal(t, store.ParkBlocked, p.Reason, "%s", p.ID)
		}
		// A broker redelivery of the failed message cannot slip past.
		ds = e.deliver(c, raw2, 2)
		require.Equal(t, []string{"E2:duplicate"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, "dead_lettered")

		// Other keys keep flowing.
		require.Equal(t, []string{"O1:applied"}, ordSummary(e.deliver(c, ordEvent("O1", other, 1, "pedido_criado"), 1)))
		require.Equal(t, []string{"O2:applied"}, ordSummary(e.deliver(c, ordEvent("O2", other, 2, "pedido_pago"), 1)))
		e.requireObject(other, "pedido_pago", 2)
		require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k))

		dls := e.deadLetters(false)
		require.Len(t, dls, 1)
		dl := dls[0]
		require.Equal(t, "E2", dl.ID)
		require.Equal(t, ordSource, dl.Source)
		require.Equal(t, k, dl.PartitionKey)
		require.Equal(t, "2", ordVer(dl.ObjectVersion))
		require.Equal(t, raw2, dl.Envelope, "the DLQ keeps the original envelope unchanged")
		require.Equal(t, 1, dl.Attempts)
		require.Contains(t, dl.Reason, "permanent failure")
		require.Contains(t, dl.LastError, "E2 is broken")
		require.Empty(t, dl.Resolution)
		cn := e.counts()
		require.Equal(t, int64(1), cn.DeadLetters)
		require.Equal(t, int64(2), cn.Blocked)
		require.Equal(t, []string{"E2 dead_lettered 2/1", "E3 blocked 3/1", "E4 blocked 4/1", "E2 duplicate 2"}, e.auditLines(k))
		require.Contains(t, e.auditRow(k, "E2", seqbox.DeadLettered).NextAction, "redrive or skip")
		require.Contains(t, e.auditRow(k, "E3", seqbox.Blocked).NextAction, "redrive or skip")

		// The handler is fixed; the operator redrives: 2, then 3, then 4.
		h.fix("E2")
		ds, err := c.Redrive(e.ctx, dl.Seq)
		require.NoError(t, err)
		require.Equal(t, []string{"E2:applied", "E3:applied", "E4:applied"}, ordSummary(ds))
		require.Equal(t, ordSource, ds[0].Source, "the redriven message keeps its identity")
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 endereco_alterado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireKey(k, ordV(4), false, 0, 0)
		all := e.deadLetters(true)
		require.Len(t, all, 1)
		require.Equal(t, "redriven", all[0].Resolution)
		require.NotNil(t, all[0].ResolvedAt)
		require.Empty(t, e.deadLetters(false))
		require.Empty(t, e.gapLines(k), "nothing was skipped")
		cn = e.counts()
		require.Equal(t, int64(6), cn.Applied)
		require.Zero(t, cn.DeadLetters)
		e.requireNothingParked()

		_, err = c.Redrive(e.ctx, dl.Seq)
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		require.Equal(t, []string{"E2:duplicate"}, ordSummary(e.deliver(c, raw2, 3)))
		require.Len(t, e.effects(k), 4)
	})

	t.Run("Skip", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "endereco_alterado", ordFailPermanent())
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, raw2, 1)))
		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		require.Equal(t, []string{"E4:blocked"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		require.Equal(t, []string{"O1:applied"}, ordSummary(e.deliver(c, ordEvent("O1", other, 1, "pedido_criado"), 1)))
		dls := e.deadLetters(false)
		require.Len(t, dls, 1)

		_, err := c.Skip(e.ctx, dls[0].Seq, "", "")
		require.Error(t, err, "a skip must say who and why")
		e.requireKey(k, ordV(1), true, 0, 2)

		ds, err := c.Skip(e.ctx, dls[0].Seq, "ana@ops", "address change superseded by the payment")
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied", "E4:applied"}, ordSummary(ds))
		require.Equal(t, []string{"2-2 by ana@ops"}, e.gapLines(k))
		require.Equal(t, "address change superseded by the payment", e.gaps(k)[0].Reason)
		all := e.deadLetters(true)
		require.Len(t, all, 1)
		require.Contains(t, all[0].Resolution, "ana@ops")
		require.Contains(t, all[0].Resolution, "address change superseded by the payment")
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireKey(k, ordV(4), false, 0, 0)
		require.Equal(t, []string{"E2:duplicate"}, ordSummary(e.deliver(c, raw2, 2)), "a skipped message does not come back")
		_, err = c.Skip(e.ctx, dls[0].Seq, "ana@ops", "twice")
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		require.Equal(t, []string{"E2 dead_lettered 2/1", "E3 blocked 3/1", "E4 blocked 4/1", "E2 duplicate 2"}, e.auditLines(k))
		e.requireNothingParked()
	})

	// 4 (not 3) was parked behind the blocked key. After the skip of 2 it
	// still waits for 3, as a held message: bounded by HoldTimeout like any
	// hold.
	t.Run("SkipLeavesGapHeldWithDeadline", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = seqbox.HoldExpiryAdvance })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "x", ordFailPermanent()), 1)))
		require.Equal(t, []string{"E4:blocked"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		dls := e.deadLetters(false)
		require.Len(t, dls, 1)
		ds, err := c.Skip(e.ctx, dls[0].Seq, "ana@ops", "obsolete")
		require.NoError(t, err)
		require.Empty(t, ds, "4 still waits for 3")
		e.requireKey(k, ordV(2), false, 1, 0)
		e.clock.Advance(10 * time.Minute) // far past HoldTimeout (1m)
		ds, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied"}, ordSummary(ds), "a message re-held after a block must get a hold deadline")
		require.Equal(t, []string{"2-2 by ana@ops", "3-3 by hold_expiry=advance"}, e.gapLines(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})

	// The fix is incomplete: the redrive fails transiently. The operator
	// then skips the message. Nothing on the key may wait behind it any
	// more.
	t.Run("RedriveRetriesThenSkip", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		h.failPermanently("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "endereco_alterado"), 1)))
		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		dls := e.deadLetters(false)
		require.Len(t, dls, 1)

		h.fix("E2")
		h.failOnce("E2")
		ds, err := c.Redrive(e.ctx, dls[0].Seq)
		require.NoError(t, err)
		require.Equal(t, []string{"E2:retry"}, ordSummary(ds))
		e.requireKey(k, ordV(1), true, 0, 1)
		require.Len(t, e.deadLetters(false), 1, "still in the DLQ")

		ds, err = c.Skip(e.ctx, dls[0].Seq, "ana@ops", "give up on the address change")
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(ds))
		ds = e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)
		require.Equal(t, []string{"E4:applied"}, ordSummary(ds), "nothing waits behind a skipped message (reason: %s)", ds[0].Reason)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})

	t.Run("HeldSuccessorBecomesBlocked", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "endereco_alterado", ordFailPermanent()), 1)))
		e.requireKey(k, ordV(1), true, 0, 1)
		// The hold deadline of a message now blocked does not apply: the
		// block is the operator's to resolve.
		e.clock.Advance(2 * time.Minute)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, ds)
		e.requireKey(k, ordV(1), true, 0, 1)
		dls := e.deadLetters(false)
		require.Len(t, dls, 1)
		ds, err = c.Skip(e.ctx, dls[0].Seq, "ana@ops", "obsolete")
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(ds))
		e.requireObject(k, "pedido_pago", 3)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago"}, e.effects(k))
		e.requireNothingParked()
	})
}

// version 2 fails permanently with OnDeadLetter=release: a known gap, and
// the key continues.
func ordPermanentRelease(t *testing.T, open Factory) {
	e := ordSetup(t, open, func(c *seqbox.Config) { c.OnDeadLetter = seqbox.DeadLetterRelease })
	c := e.consumer()
	const k = "PED-1007"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
	raw2 := ordEvent("E2", k, 2, "endereco_alterado", ordFailPermanent())
	ds := e.deliver(c, raw2, 1)
	require.Equal(t, []string{"E2:dead_lettered", "E3:applied"}, ordSummary(ds))
	require.Equal(t, []string{"2-2 by on_dead_letter=release"}, e.gapLines(k))
	require.Contains(t, e.gaps(k)[0].Reason, "permanent failure")
	e.requireKey(k, ordV(3), false, 0, 0)
	require.Equal(t, []string{"E4:applied"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))

	require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
	e.requireObject(k, "pedido_enviado", 4)
	require.Equal(t, []string{"E3 held 3/1", "E2 dead_lettered 2/1"}, e.auditLines(k))
	require.Contains(t, e.auditRow(k, "E2", seqbox.DeadLettered).NextAction, "redrive")
	dls := e.deadLetters(false)
	require.Len(t, dls, 1, "the failed message stays in the DLQ for the operator")
	require.Equal(t, "E2", dls[0].ID)
	require.Equal(t, raw2, dls[0].Envelope)
	e.requireNothingParked()

	// Redriving it now, after the key moved on, cannot rewind the object:
	// it is stale, and the DLQ row is settled by that final decision.
	ds, err := c.Redrive(e.ctx, dls[0].Seq)
	require.NoError(t, err)
	require.Equal(t, []string{"E2:stale"}, ordSummary(ds))
	require.Len(t, e.effects(k), 3)
	e.requireObject(k, "pedido_enviado", 4)
	var unresolved []string
	for _, d := range e.deadLetters(false) {
		unresolved = append(unresolved, fmt.Sprintf("seq=%d %s resolution=%q", d.Seq, d.ID, d.Resolution))
	}
	require.Empty(t, unresolved, "a redrive that reached a final outcome (stale) must resolve its DLQ row")
	require.Zero(t, e.counts().DeadLetters)
}

// a transient failure on 2 while 3 arrives: 3 waits and never overtakes.
func ordTransient(t *testing.T, open Factory) {
	const k = "PED-1008"
	for _, gp := range []seqbox.GapPolicy{seqbox.GapHold, seqbox.GapAdvance} {
		t.Run("GapPolicy="+string(gp), func(t *testing.T) {
			e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = gp })
			h := newOrdHandler(e.cfg.Name)
			h.failOnce("E2")
			c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
			e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
			raw2 := ordEvent("E2", k, 2, "pedido_pago")
			ds := e.deliver(c, raw2, 1)
			require.Equal(t, []string{"E2:retry"}, ordSummary(ds))
			require.False(t, ds[0].Outcome.Acks(), "a retry is left for redelivery")
			require.Contains(t, ds[0].Reason, "attempt 1 of 3")

			ds = e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 1)
			require.Equal(t, []string{"E3:held"}, ordSummary(ds), "3 must wait behind the retrying 2")
			require.Contains(t, ds[0].Reason, "E2")
			require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k))
			e.requireKey(k, ordV(1), false, 1, 0)

			ds = e.deliver(c, raw2, 2)
			require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(ds))
			require.Equal(t, 2, ds[0].Attempt)
			require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
			e.requireObject(k, "pedido_enviado", 3)
			require.Equal(t, []string{"E2 retry 2/1", "E3 held 3/1"}, e.auditLines(k))
			require.Empty(t, e.gapLines(k), "nothing was skipped")
			require.Equal(t, 2, h.calls["E2"])
			require.Equal(t, 1, h.calls["E3"])
			e.requireNothingParked()
		})
	}

	// 4 (not 3) arrives while 2 is retrying: it parks behind the retry. Once
	// 2 settles, 4 must be treated like any other gap: applied with a
	// recorded gap under GapPolicy=advance ...
	t.Run("ParkedBehindRetryThenGapAdvance", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "pedido_pago")
		require.Equal(t, []string{"E2:retry"}, ordSummary(e.deliver(c, raw2, 1)))
		require.Equal(t, []string{"E4:held"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		ds := e.deliver(c, raw2, 2)
		require.Equal(t, []string{"E2:applied", "E4:applied"}, ordSummary(ds),
			"under GapPolicy=advance the parked 4 applies with a recorded gap once 2 settles")
		require.Equal(t, []string{"3-3 by gap_policy=advance"}, e.gapLines(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})

	// ... and bounded by HoldTimeout under GapPolicy=hold.
	t.Run("ParkedBehindRetryThenHoldTimeout", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = seqbox.HoldExpiryAdvance })
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "pedido_pago")
		require.Equal(t, []string{"E2:retry"}, ordSummary(e.deliver(c, raw2, 1)))
		require.Equal(t, []string{"E4:held"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, raw2, 2)))
		e.requireKey(k, ordV(2), false, 1, 0)
		e.clock.Advance(10 * time.Minute) // far past HoldTimeout (1m)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied"}, ordSummary(ds),
			"a message held for a gap must have a hold deadline even if it was first parked behind a retry")
		require.Equal(t, []string{"3-3 by hold_expiry=advance"}, e.gapLines(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})
}

// the consumer restarts during version 3.
func ordRestart(t *testing.T, open Factory) {
	const k = "PED-1009"
	for _, point := range []seqbox.FaultPoint{seqbox.FaultAfterInboxInsert, seqbox.FaultAfterHandler, seqbox.FaultBeforeCommit} {
		t.Run(string(point), func(t *testing.T) {
			e := ordSetup(t, open)
			crash := &ordCrasher{}
			c := e.consumer(func(c *seqbox.Config) { c.Faults = crash.hook })
			e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
			e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)

			raw3 := ordEvent("E3", k, 3, "pedido_enviado")
			crash.arm(point)
			ds, err := c.Deliver(e.ctx, raw3, 1)
			require.ErrorIs(t, err, seqbox.ErrCrash)
			require.True(t, seqbox.IsInjected(err))
			require.Nil(t, ds)
			require.Equal(t, 1, crash.fired)
			// The crash rolled everything of 3 back: no effect, no identity,
			// no version move, nothing parked.
			require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))
			e.requireObject(k, "pedido_pago", 2)
			require.Equal(t, int64(2), e.counts().InboxRows)
			e.requireNothingParked()

			// Restarted consumer: the broker redelivers 3.
			c2 := e.consumer()
			require.Equal(t, []string{"E3:applied"}, ordSummary(e.deliver(c2, raw3, 2)))
			require.Equal(t, []string{"E3:duplicate"}, ordSummary(e.deliver(c2, raw3, 3)))
			require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
			e.requireObject(k, "pedido_enviado", 3)
			require.Equal(t, []string{"E3 duplicate 3"}, e.auditLines(k))
		})
	}

	// A crash while 2 drains the held 3: the drain rolls back with it, and 3
	// is still parked, not lost.
	t.Run("DuringDrain", func(t *testing.T) {
		e := ordSetup(t, open)
		crash := &ordCrasher{}
		c := e.consumer(func(c *seqbox.Config) { c.Faults = crash.hook })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 1)))
		raw2 := ordEvent("E2", k, 2, "pedido_pago")
		crash.arm(seqbox.FaultBeforeCommit)
		_, err := c.Deliver(e.ctx, raw2, 1)
		require.ErrorIs(t, err, seqbox.ErrCrash)
		e.requireKey(k, ordV(1), false, 1, 0)
		require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k))

		c2 := e.consumer()
		require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(e.deliver(c2, raw2, 2)))
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 3)
		e.requireNothingParked()
	})
}

// ordMemQueue is a minimal at-least-once transport: a message stays until
// acked; a crashed consumer's leases are expired by the test.
type ordMemQueue struct {
	mu   sync.Mutex
	msgs []*ordMemMsg
}

type ordMemMsg struct {
	body     []byte
	attempts int
	leased   bool
	acked    bool
}

type ordMemDelivery struct {
	q       *ordMemQueue
	m       *ordMemMsg
	attempt int
}

func (q *ordMemQueue) publish(body []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, &ordMemMsg{body: body})
}

func (q *ordMemQueue) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	deadline := time.Now().Add(20 * time.Millisecond)
	for {
		q.mu.Lock()
		var out []transport.Delivery
		for _, m := range q.msgs {
			if len(out) == max {
				break
			}
			if !m.acked && !m.leased {
				m.leased = true
				m.attempts++
				out = append(out, &ordMemDelivery{q: q, m: m, attempt: m.attempts})
			}
		}
		q.mu.Unlock()
		if len(out) > 0 || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (q *ordMemQueue) Close() error { return nil }

// expireLeases makes every unacked message deliverable again, as a lease
// timeout does after a consumer dies.
func (q *ordMemQueue) expireLeases() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.msgs {
		m.leased = false
	}
}

func (q *ordMemQueue) unacked() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, m := range q.msgs {
		if !m.acked {
			n++
		}
	}
	return n
}

func (d *ordMemDelivery) Body() []byte { return d.m.body }
func (d *ordMemDelivery) Attempt() int { return d.attempt }
func (d *ordMemDelivery) Ack(context.Context) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	d.m.acked, d.m.leased = true, false
	return nil
}
func (d *ordMemDelivery) Nack(context.Context, time.Duration) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	d.m.leased = false
	return nil
}
func (d *ordMemDelivery) Extend(context.Context, time.Duration) error { return nil }

// ordObserved collects the decisions a consumer reports after commit.
type ordObserved struct {
	mu sync.Mutex
	ds []seqbox.Decision
}

func (o *ordObserved) observe(d seqbox.Decision) { o.mu.Lock(); o.ds = append(o.ds, d); o.mu.Unlock() }
func (o *ordObserved) summary() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return ordSummary(o.ds)
}

// the write's confirmation is lost: the commit happened, the ack did not.
func ordLostConfirmation(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	const k = "PED-1010"
	direct := e.consumer()
	e.deliver(direct, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e.deliver(direct, ordEvent("E2", k, 2, "pedido_pago"), 1)

	q := &ordMemQueue{}
	q.publish(ordEvent("E3", k, 3, "pedido_enviado"))
	crash := &ordCrasher{}
	crash.arm(seqbox.FaultAfterCommit)
	seen1 := &ordObserved{}
	run := func(c *seqbox.Consumer, until func() bool) error {
		ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx) }()
		for {
			select {
			case err := <-errc:
				return err
			case <-time.After(5 * time.Millisecond):
				if until != nil && until() {
					cancel()
					return <-errc
				}
			}
		}
	}
	c1 := e.consumer(func(c *seqbox.Config) {
		c.Transport, c.Faults, c.Observer, c.Workers, c.BatchSize = q, crash.hook, seen1.observe, 1, 1
	})
	err := run(c1, nil)
	require.ErrorIs(t, err, seqbox.ErrCrash, "the consumer dies between commit and ack")
	require.Equal(t, []string{"E3:applied"}, seen1.summary(), "the commit happened")
	require.Equal(t, 1, q.unacked(), "the ack did not")
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))

	q.expireLeases()
	seen2 := &ordObserved{}
	c2 := e.consumer(func(c *seqbox.Config) {
		c.Transport, c.Observer, c.Workers, c.BatchSize = q, seen2.observe, 1, 1
	})
	require.NoError(t, run(c2, func() bool { return q.unacked() == 0 }))
	require.Equal(t, []string{"E3:duplicate"}, seen2.summary())
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k), "one effect")
	e.requireObject(k, "pedido_enviado", 3)
	require.Equal(t, []string{"E3 duplicate 3"}, e.auditLines(k))
	require.Equal(t, int64(3), e.counts().InboxRows)
}

// two producers publish the same version for one key.
func ordTwoProducers(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "OPP-3100"
	e.deliver(c, ordEvent("A-1", k, 1, "proposta_enviada", ordWithSource("crm-a")), 1)
	require.Equal(t, []string{"A-2:applied"}, ordSummary(e.deliver(c, ordEvent("A-2", k, 2, "cliente_respondeu", ordWithSource("crm-a")), 1)))
	rawB := ordEvent("B-2", k, 2, "reuniao_marcada", ordWithSource("crm-b"))
	ds := e.deliver(c, rawB, 1)
	require.Equal(t, []string{"B-2:version_conflict"}, ordSummary(ds))
	require.Contains(t, ds[0].Reason, "version 2 is already committed under another identity")

	e.requireObject(k, "cliente_respondeu", 2)
	require.Equal(t, []string{"A-1@1 proposta_enviada", "A-2@2 cliente_respondeu"}, e.effects(k))
	kv := e.requireKey(k, ordV(2), false, 0, 0)
	require.Equal(t, 1, kv.Parked, "parked for investigation")
	ps := e.parked(k)
	require.Len(t, ps, 1)
	require.Equal(t, store.ParkVersionConflict, ps[0].Reason)
	require.Equal(t, "crm-b", ps[0].Source)
	require.Equal(t, "B-2", ps[0].ID)
	require.Equal(t, rawB, ps[0].Envelope)
	require.Equal(t, []string{"B-2 version_conflict 2/2"}, e.auditLines(k))
	a := e.auditRow(k, "B-2", seqbox.VersionConflict)
	require.Equal(t, "crm-b", a.Source)
	require.Contains(t, a.Reason, "another identity")
	require.Contains(t, a.NextAction, "investigate")
	cn := e.counts()
	require.Equal(t, int64(1), cn.Parked)
	require.Zero(t, cn.Held)
	require.Zero(t, cn.Blocked)

	// Redelivery of the conflicting copy is a duplicate; the key is not
	// blocked by the investigation and keeps flowing.
	require.Equal(t, []string{"B-2:duplicate"}, ordSummary(e.deliver(c, rawB, 2)))
	require.Len(t, e.parked(k), 1, "parked once")
	require.Equal(t, []string{"A-3:applied"}, ordSummary(e.deliver(c, ordEvent("A-3", k, 3, "oportunidade_ganha", ordWithSource("crm-a")), 1)))
	e.requireObject(k, "oportunidade_ganha", 3)
}

// one key concentrates disproportionate volume, interleaved with others.
func ordHotKey(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const hot, hotN, others, otherN = "HOT", 120, 4, 8
	next := map[string]int{}
	var want = map[string][]string{}
	deliverKey := func(key string, v int, wantOutcomes ...string) {
		id := fmt.Sprintf("%s-%d", key, v)
		ds := e.deliver(c, ordEvent(id, key, v, fmt.Sprintf("step_%d", v)), 1)
		require.Equal(t, wantOutcomes, ordSummary(ds), "delivering %s", id)
	}
	for v := 1; v <= hotN; v++ {
		want[hot] = append(want[hot], fmt.Sprintf("%s-%d@%d step_%d", hot, v, v, v))
	}
	for o := range others {
		key := fmt.Sprintf("COLD-%d", o)
		for v := 1; v <= otherN; v++ {
			want[key] = append(want[key], fmt.Sprintf("%s-%d@%d step_%d", key, v, v, v))
		}
	}
	// The hot key arrives with every tenth pair swapped, so it holds now
	// and then; a cold key's event comes in after every few hot ones and
	// must apply at once, never waiting for the hot key.
	for v := 1; v <= hotN; v++ {
		switch {
		case v%10 == 4:
			deliverKey(hot, v+1, fmt.Sprintf("%s-%d:held", hot, v+1))
		case v%10 == 5:
			deliverKey(hot, v-1, fmt.Sprintf("%s-%d:applied", hot, v-1), fmt.Sprintf("%s-%d:applied", hot, v))
		default:
			deliverKey(hot, v, fmt.Sprintf("%s-%d:applied", hot, v))
		}
		if v%4 == 0 {
			key := fmt.Sprintf("COLD-%d", (v/4)%others)
			if next[key] < otherN {
				next[key]++
				deliverKey(key, next[key], fmt.Sprintf("%s-%d:applied", key, next[key]))
			}
		}
	}
	for o := range others {
		key := fmt.Sprintf("COLD-%d", o)
		for next[key] < otherN {
			next[key]++
			deliverKey(key, next[key], fmt.Sprintf("%s-%d:applied", key, next[key]))
		}
	}
	for key, w := range want {
		require.Equal(t, w, e.effects(key), "effects of %s in version order", key)
	}
	e.requireObject(hot, fmt.Sprintf("step_%d", hotN), hotN)
	e.requireObject("COLD-0", fmt.Sprintf("step_%d", otherN), otherN)
	cn := e.counts()
	require.Equal(t, int64(hotN+others*otherN), cn.Applied)
	require.Equal(t, int64(1+others), cn.Keys)
	require.Len(t, e.auditLines(hot), hotN/10, "one held per swapped pair")
	e.requireNothingParked()
}

// the event arrives after its business deadline.
func ordDeadline(t *testing.T, open Factory) {
	const k = "PED-1011"
	t.Run("NextVersionExpired", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Hour })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado", ordWithTime(ordT0.Add(-30*time.Minute))), 1)
		ds := e.deliver(c, ordEvent("E2", k, 2, "lembrete_pagamento", ordWithTime(ordT0.Add(-2*time.Hour))), 1)
		require.Equal(t, []string{"E2:expired"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, "past the 1h0m0s business deadline")
		// The expired version is a known gap, so its successors do not wait
		// for it.
		require.Equal(t, []string{"2-2 by pipeline"}, e.gapLines(k))
		require.Contains(t, e.gaps(k)[0].Reason, "expired")
		require.Equal(t, []string{"E3:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago", ordWithTime(ordT0.Add(-10*time.Minute))), 1)))
		// An expired event that was held: released by its predecessor, it is
		// expired at release and the one after it still applies.
		require.Equal(t, []string{"E5:held"}, ordSummary(e.deliver(c, ordEvent("E5", k, 5, "pedido_enviado", ordWithTime(ordT0)), 1)))
		ds = e.deliver(c, ordEvent("E4", k, 4, "oferta_relampago", ordWithTime(ordT0.Add(-3*time.Hour))), 1)
		require.Equal(t, []string{"E4:expired", "E5:applied"}, ordSummary(ds))

		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E5@5 pedido_enviado"}, e.effects(k), "no effect for expired events")
		e.requireObject(k, "pedido_enviado", 5)
		require.Equal(t, []string{"E2 expired 2/1", "E5 held 5/3", "E4 expired 4/3"}, e.auditLines(k))
		require.Contains(t, e.auditRow(k, "E4", seqbox.Expired).NextAction, "business deadline")
		e.requireNothingParked()
	})

	t.Run("UnkeyedAndFarAhead", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Hour })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado", ordWithTime(ordT0)), 1)
		// Expired beyond a gap: recorded, no gap, no version move.
		require.Equal(t, []string{"E7:expired"}, ordSummary(e.deliver(c, ordEvent("E7", k, 7, "x", ordWithTime(ordT0.Add(-25*time.Hour))), 1)))
		require.Empty(t, e.gapLines(k))
		e.requireObject(k, "pedido_criado", 1)
		// No time: no deadline.
		require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)))
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))
	})

	// With FirstVersion, an expired first version is the next version too:
	// its successors must not be held for it.
	t.Run("FirstVersionExpired", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Hour; c.FirstVersion = ordV(1) })
		c := e.consumer()
		require.Equal(t, []string{"E1:expired"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado", ordWithTime(ordT0.Add(-2*time.Hour))), 1)))
		require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago", ordWithTime(ordT0)), 1)),
			"version 1 expired, so version 2 is next")
		require.Equal(t, []string{"1-1 by pipeline"}, e.gapLines(k))
		e.requireObject(k, "pedido_pago", 2)
		e.requireNothingParked()
	})
}

// a person edits the object while the queue processes.
func ordPersonEdits(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1012"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)

	// Out of band: the object is edited by hand and its version moves to 5
	// in one transaction with the business write (there is no public API
	// for this yet, so the store transaction is used directly).
	tx, err := e.st.Begin(e.ctx)
	require.NoError(t, err)
	require.NoError(t, tx.EnsureKey(e.ctx, e.cfg.Name, k, ordT0))
	ks, err := tx.Key(e.ctx, e.cfg.Name, k)
	require.NoError(t, err)
	require.Equal(t, "2", ordVer(ks.Version))
	ok, err := tx.AdvanceKey(e.ctx, e.cfg.Name, k, ordV(1), 5, ordT0)
	require.NoError(t, err)
	require.False(t, ok, "compare-and-set must refuse a wrong previous version")
	ok, err = tx.AdvanceKey(e.ctx, e.cfg.Name, k, ks.Version, 5, ordT0)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = tx.SQL().ExecContext(e.ctx, `UPDATE record_objects SET state = $3, version = $4 WHERE consumer = $1 AND partitionkey = $2`,
		e.cfg.Name, k, "editado_manualmente", 5)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	for _, late := range []struct {
		id string
		v  int
	}{{"E3", 3}, {"E4", 4}} {
		ds := e.deliver(c, ordEvent(late.id, k, late.v, "pedido_enviado"), 1)
		require.Equal(t, []string{late.id + ":stale"}, ordSummary(ds))
		require.Contains(t, ds[0].Reason, fmt.Sprintf("version %d is older than the committed version 5", late.v))
	}
	e.requireObject(k, "editado_manualmente", 5)
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k), "no late event rewrote the edit")
	require.Equal(t, []string{"E3 stale 3/5", "E4 stale 4/5"}, e.auditLines(k))
	require.Equal(t, []string{"E6:applied"}, ordSummary(e.deliver(c, ordEvent("E6", k, 6, "pedido_entregue"), 1)))
	e.requireObject(k, "pedido_entregue", 6)
	// A stale event is never retried: redelivered, it is a duplicate.
	require.Equal(t, []string{"E3:duplicate"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 2)))
	e.requireNothingParked()
}

// FirstVersion set: a key must start there.
func ordFirstVersion(t *testing.T, open Factory) {
	const k, z = "PED-1013", "PED-1014"
	t.Run("Hold", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.FirstVersion = ordV(1) })
		c := e.consumer()
		ds := e.deliver(c, ordEvent("E3", k, 3, "pedido_cancelado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(ds), "3 is not a baseline when keys start at 1")
		require.Contains(t, ds[0].Reason, "waiting for version 1 (got 3)")
		e.requireKey(k, nil, false, 1, 0)
		require.Equal(t, []string{"E1:applied"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)))
		require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)))
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_cancelado"}, e.effects(k))
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"E3 held 3/-"}, e.auditLines(k))

		ds = e.deliver(c, ordEvent("Z0", z, 0, "rascunho"), 1)
		require.Equal(t, []string{"Z0:stale"}, ordSummary(ds), "below FirstVersion")
		require.Contains(t, ds[0].Reason, "first version 1")
		require.Equal(t, []string{"Z0 stale 0/-"}, e.auditLines(z))
		require.Empty(t, e.effects(z))
		e.requireNothingParked()
	})

	// The hold times out and HoldExpiry=advance applies 3: the recorded gap
	// must name every missing version, 1 and 2.
	t.Run("HoldExpiryAdvance", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.FirstVersion = ordV(1); c.HoldExpiry = seqbox.HoldExpiryAdvance })
		c := e.consumer()
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_cancelado"), 1)))
		e.clock.Advance(2 * time.Minute)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(ds))
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"1-2 by hold_expiry=advance"}, e.gapLines(k))
	})
}

// objectversion carried as a string ("5").
func ordStringVersion(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "DOC-8"
	require.Equal(t, []string{"S5:applied"}, ordSummary(e.deliver(c, ordEvent("S5", k, "5", "versao_recebida"), 1)))
	e.requireObject(k, "versao_recebida", 5)
	ds := e.deliver(c, ordEvent("S7", k, "7", "aprovacao"), 1)
	require.Equal(t, []string{"S7:held"}, ordSummary(ds))
	require.Equal(t, "7", ordVer(ds[0].ObjectVersion))
	require.Equal(t, []string{"S6:applied", "S7:applied"}, ordSummary(e.deliver(c, ordEvent("S6", k, 6, "revisao"), 1)),
		"a numeric 6 and a string 7 are one sequence")
	require.Equal(t, []string{"S4:stale"}, ordSummary(e.deliver(c, ordEvent("S4", k, "4", "antiga"), 1)))
	require.Equal(t, []string{"S5@5 versao_recebida", "S6@6 revisao", "S7@7 aprovacao"}, e.effects(k))
	e.requireObject(k, "aprovacao", 7)
	require.Equal(t, []string{"S7 held 7/5", "S4 stale 4/7"}, e.auditLines(k))
	e.requireNothingParked()
}

// a key blocked longer than MaxBlock is released by Sweep with a gap.
func ordMaxBlock(t *testing.T, open Factory) {
	const k, other = "PED-1015", "PED-1016"
	t.Run("DeadLetterBlock", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxBlock = 10 * time.Minute })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "x", ordFailPermanent()), 1)))
		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		e.deliver(c, ordEvent("O1", other, 1, "pedido_criado"), 1)

		e.clock.Advance(9 * time.Minute)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, ds, "not blocked long enough yet")
		e.requireKey(k, ordV(1), true, 0, 1)

		e.clock.Advance(2 * time.Minute)
		ds, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(ds))
		require.Equal(t, []string{"2-2 by max_block"}, e.gapLines(k))
		require.Contains(t, e.gaps(k)[0].Reason, "longer than MaxBlock 10m0s")
		all := e.deadLetters(true)
		require.Len(t, all, 1)
		require.Contains(t, all[0].Resolution, "max_block")
		require.Contains(t, e.logs.String(), "ALERT key blocked longer than MaxBlock")
		require.Contains(t, e.logs.String(), "key="+k)
		e.requireKey(k, ordV(3), false, 0, 0)
		e.requireObject(k, "pedido_pago", 3)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago"}, e.effects(k))
		e.requireObject(other, "pedido_criado", 1)
		require.Empty(t, e.gapLines(other))
		require.Equal(t, []string{"E2 dead_lettered 2/1", "E3 blocked 3/1"}, e.auditLines(k))
		e.requireNothingParked()
	})

	t.Run("HoldExpiryBlock", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxBlock = 10 * time.Minute })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		e.clock.Advance(2 * time.Minute)
		ds, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, ds)
		e.requireKey(k, ordV(1), true, 0, 1)
		e.clock.Advance(11 * time.Minute)
		ds, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(ds))
		require.Equal(t, []string{"2-2 by max_block"}, e.gapLines(k))
		require.Contains(t, e.logs.String(), "ALERT key blocked longer than MaxBlock")
		e.requireObject(k, "pedido_pago", 3)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago"}, e.effects(k))
		require.Equal(t, []string{"E3 held 3/1"}, e.auditLines(k))
		e.requireNothingParked()
	})
}

// The seed's worked example: PED-4821 receives v1, v3, v2 and ends
// cancelled at version 3 under both gap policies.
func ordPED4821(t *testing.T, open Factory) {
	const k = "PED-4821"
	v1 := ordEvent("EVT-9001", k, 1, "pedido_criado", ordWithTime(time.Date(2026, 9, 25, 10, 0, 0, 0, time.UTC)))
	v3 := ordEvent("EVT-9087", k, 3, "pedido_cancelado", ordWithTime(time.Date(2026, 9, 25, 10, 3, 0, 0, time.UTC)),
		ordWithAttr("causationid", "CMD-7712"), ordWithAttr("publishedat", "2026-09-25T10:03:04Z"))
	v2 := ordEvent("EVT-9050", k, 2, "endereco_alterado", ordWithTime(time.Date(2026, 9, 25, 10, 5, 0, 0, time.UTC)))

	t.Run("GapPolicy=hold", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		require.Equal(t, []string{"EVT-9001:applied"}, ordSummary(e.deliver(c, v1, 1)))
		require.Equal(t, []string{"EVT-9087:held"}, ordSummary(e.deliver(c, v3, 1)))
		require.Equal(t, []string{"EVT-9050:applied", "EVT-9087:applied"}, ordSummary(e.deliver(c, v2, 1)))
		// The address change applied before the cancellation, as the source
		// ordered them; the order ends cancelled.
		require.Equal(t, []string{"EVT-9001@1 pedido_criado", "EVT-9050@2 endereco_alterado", "EVT-9087@3 pedido_cancelado"}, e.effects(k))
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"EVT-9087 held 3/1"}, e.auditLines(k))
		require.Equal(t, []string{"EVT-9050:duplicate"}, ordSummary(e.deliver(c, v2, 2)))
		e.requireObject(k, "pedido_cancelado", 3)
		e.requireNothingParked()
	})

	t.Run("GapPolicy=advance", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
		c := e.consumer()
		require.Equal(t, []string{"EVT-9001:applied"}, ordSummary(e.deliver(c, v1, 1)))
		require.Equal(t, []string{"EVT-9087:applied"}, ordSummary(e.deliver(c, v3, 1)))
		ds := e.deliver(c, v2, 1)
		require.Equal(t, []string{"EVT-9050:stale"}, ordSummary(ds), "the late address change must not reopen a cancelled order")
		require.Equal(t, []string{"EVT-9001@1 pedido_criado", "EVT-9087@3 pedido_cancelado"}, e.effects(k), "v2 never applied")
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"2-2 by gap_policy=advance"}, e.gapLines(k))
		// The seed's evidence: object, received 2, current 3, no next action.
		require.Equal(t, []string{"EVT-9050 stale 2/3"}, e.auditLines(k))
		a := e.auditRow(k, "EVT-9050", seqbox.Stale)
		require.Equal(t, ordSource, a.Source)
		require.Contains(t, a.Reason, "version 2 is older than the committed version 3")
		require.Contains(t, a.NextAction, "none")
		// Never retried: redelivered, it is a duplicate with still no effect.
		require.Equal(t, []string{"EVT-9050:duplicate"}, ordSummary(e.deliver(c, v2, 2)))
		require.Len(t, e.effects(k), 2)
		e.requireNothingParked()
	})
}

// The seed's follow-up example: 41, 42, 43, then 41 republished under a
// new id must not create a new task.
func ordOpportunity(t *testing.T, open Factory) {
	const k = "OPP-2481"
	for _, gp := range []seqbox.GapPolicy{seqbox.GapHold, seqbox.GapAdvance} {
		t.Run("GapPolicy="+string(gp), func(t *testing.T) {
			e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = gp })
			c := e.consumer()
			src := ordWithSource("crm")
			raw41 := ordEvent("EVT-41", k, 41, "proposta_enviada", src)
			require.Equal(t, []string{"EVT-41:applied"}, ordSummary(e.deliver(c, raw41, 1)), "41 is the key's baseline")
			require.Equal(t, []string{"EVT-42:applied"}, ordSummary(e.deliver(c, ordEvent("EVT-42", k, 42, "cliente_respondeu", src), 1)))
			require.Equal(t, []string{"EVT-43:applied"}, ordSummary(e.deliver(c, ordEvent("EVT-43", k, 43, "oportunidade_ganha", src), 1)))

			ds := e.deliver(c, ordEvent("EVT-41-R", k, 41, "proposta_enviada", src, ordWithAttr("publishedat", "2026-09-26T09:00:00Z")), 1)
			require.Equal(t, []string{"EVT-41-R:stale"}, ordSummary(ds))
			require.Contains(t, ds[0].Reason, "version 41 is older than the committed version 43")
			require.Equal(t, []string{"EVT-41:duplicate"}, ordSummary(e.deliver(c, raw41, 2)))

			require.Equal(t, []string{"EVT-41@41 proposta_enviada", "EVT-42@42 cliente_respondeu", "EVT-43@43 oportunidade_ganha"}, e.effects(k),
				"no new follow-up task: effects stay 3")
			e.requireObject(k, "oportunidade_ganha", 43)
			require.Equal(t, []string{"EVT-41-R stale 41/43", "EVT-41 duplicate 41"}, e.auditLines(k))
			require.Empty(t, e.gapLines(k))
			e.requireNothingParked()
		})
	}
}
