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
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

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
func (e *ordEnv) deliver(c *seqbox.Consumer, raw []byte, attempt int) []seqboxtype.Result {
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
func ordSummary(ds []seqboxtype.Result) []string {
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
	kv, err := e.st.Executor().KeyViewGet(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
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
	rows, err := e.st.Executor().AuditList(e.ctx, store.AuditListParams{Consumer: e.cfg.Name, Key: key, Limit: 1000})
	require.NoError(e.t, err)
	return rows
}

// auditLines renders a key's audit rows as "id outcome received/current".
// A duplicate is decided by the inbox before the ordering gate reads the
// key, so only its received version is part of its evidence.
// duplicates is how often the identities with this id were delivered
// again: counted on their inbox rows, not in the audit.
func (e *ordEnv) duplicates(id string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.st.DB().QueryRowContext(e.ctx, `SELECT COALESCE(SUM(duplicates), 0) FROM seqbox_inbox
		WHERE consumer = $1 AND id = $2`, e.cfg.Name, id).Scan(&n))
	return n
}

func (e *ordEnv) auditLines(key string) []string {
	e.t.Helper()
	out := []string{}
	for _, a := range e.audit(key) {
		require.Equal(e.t, e.cfg.Name, a.Consumer)
		if a.Outcome == seqboxtype.Duplicate {
			out = append(out, fmt.Sprintf("%s %s %s", a.ID, a.Outcome, ordVer(a.ReceivedVersion)))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", a.ID, a.Outcome, ordVer(a.ReceivedVersion), ordVer(a.CurrentVersion)))
	}
	return out
}

// auditRow returns the last audit row of id with outcome.
func (e *ordEnv) auditRow(key, id string, outcome seqboxtype.Outcome) store.AuditRow {
	e.t.Helper()
	var found *store.AuditRow
	for _, a := range e.audit(key) {
		if a.ID == id && a.Outcome == outcome {
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
	gs, err := e.st.Executor().GapList(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
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
	gs, err := e.st.Executor().GapList(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(e.t, err)
	return gs
}

func (e *ordEnv) counts() store.Counts {
	e.t.Helper()
	c, err := e.st.Executor().Counts(e.ctx, e.cfg.Name)
	require.NoError(e.t, err)
	return c
}

func (e *ordEnv) parked(key string) []store.Parked {
	e.t.Helper()
	ps, err := e.st.Executor().ParkedList(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(e.t, err)
	return ps
}

func (e *ordEnv) deadLetters(all bool) []store.DeadLetter {
	e.t.Helper()
	ds, err := e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: e.cfg.Name, All: all})
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

func (h *ordHandler) handle(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
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
	point fault.Point
	fired int
}

func (c *ordCrasher) arm(p fault.Point) { c.mu.Lock(); c.point = p; c.mu.Unlock() }

func (c *ordCrasher) hook(p fault.Point) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.point != "" && p == c.point {
		c.point = ""
		c.fired++
		return fmt.Errorf("ordering test at %s: %w", p, fault.ErrCrash)
	}
	return nil
}
