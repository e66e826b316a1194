package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// env is the one fixture of every conformance test: a fresh store with the
// record handler's business tables (its seqbox_record_effects rows are the
// business effects), the consumer configuration the test starts from, and
// the readers the tests check it with. setupInbox makes it for the inbox
// tests, on the real clock; ordSetup for the ordering scenarios, on a
// controllable clock with the consumers' logs kept.
type env struct {
	t   *testing.T
	ctx context.Context
	st  store.Store
	cfg seqbox.Config
	// clock is the configuration's Now, nil when it runs on the real clock.
	clock *testclock.Clock
	// logs is what the consumers log, nil when they log to the default
	// logger.
	logs *ordLog
}

const inboxConsumer = "inbox"

// newEnv is the configuration both kinds of test share, for consumer name
// on st: the record handler, whose tables it creates, and a fast retry
// policy.
func newEnv(t *testing.T, st store.Store, name string) *env {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	return &env{t: t, ctx: ctx, st: st, cfg: seqbox.Config{
		Name:     name,
		Store:    st,
		Handler:  replay.RecordHandler(name),
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
	}}
}

// setupInbox opens a fresh store with the configuration the inbox tests
// start from: the real clock and the default logger.
func setupInbox(t *testing.T, open Factory) *env {
	t.Helper()
	return newEnv(t, open(t), inboxConsumer)
}

// ordSetup opens a fresh store with the record handler's tables and a base
// configuration; mutators adjust the configuration.
func ordSetup(t *testing.T, open Factory, mutate ...func(*seqbox.Config)) *env {
	t.Helper()
	return ordSetupOn(t, open(t), "ordering", mutate...)
}

// ordSetupOn is ordSetup on an existing store, for a consumer of its own:
// the clock starts at ordT0, a held message waits a minute, and the logs
// are kept for the alerts a scenario expects.
func ordSetupOn(t *testing.T, st store.Store, name string, mutate ...func(*seqbox.Config)) *env {
	t.Helper()
	e := newEnv(t, st, name)
	e.clock = testclock.At(ordT0)
	e.logs = &ordLog{}
	e.cfg.HoldTimeout = time.Minute
	e.cfg.Now = e.clock.Now
	e.cfg.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	for _, m := range mutate {
		m(&e.cfg)
	}
	return e
}

// consumer builds a consumer from the base configuration plus mutators;
// the base configuration itself is left alone.
func (e *env) consumer(mutate ...func(*seqbox.Config)) *seqbox.Consumer {
	e.t.Helper()
	cfg := e.cfg
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(e.t, err)
	return c
}

// withHook arms a consumer with a crash hook at the fault points: seqbox's
// own way in, on the store it is given (internal/own).
func withHook(hook fault.Hook) func(*seqbox.Config) {
	return func(c *seqbox.Config) { c.Store = own.Wrap(c.Store, own.Options{Hook: hook}) }
}

// deliver runs one message and requires the pipeline not to fail.
func (e *env) deliver(c *seqbox.Consumer, raw []byte, attempt int) []seqboxtype.Result {
	e.t.Helper()
	results, err := c.Deliver(e.ctx, raw, attempt)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, results)
	for _, res := range results {
		require.True(e.t, res.Outcome.Valid(), "outcome %q is not in the closed set", res.Outcome)
	}
	return results
}

// effectCount counts the business effects of the consumer, of one
// identity when id is not empty.
func (e *env) effectCount(id string) int {
	e.t.Helper()
	return countEffects(e.t, e.st, e.cfg.Name, id)
}

// effects lists the record handler's effects of key (all keys when empty)
// in commit order, as "id@version type".
func (e *env) effects(key string) []string {
	e.t.Helper()
	q := `SELECT id, objectversion, type FROM seqbox_record_effects WHERE consumer = $1 ORDER BY n`
	args := []any{e.cfg.Name}
	if key != "" {
		q = `SELECT id, objectversion, type FROM seqbox_record_effects WHERE consumer = $1 AND partitionkey = $2 ORDER BY n`
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
func (e *env) object(key string) (string, *int64) {
	e.t.Helper()
	var state string
	var v *int64
	err := e.st.DB().QueryRowContext(e.ctx, `SELECT state, version FROM seqbox_record_objects WHERE consumer = $1 AND partitionkey = $2`,
		e.cfg.Name, key).Scan(&state, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	require.NoError(e.t, err)
	return state, v
}

// requireObject checks the business object's final state and version, and
// that the pipeline's key version agrees.
func (e *env) requireObject(key, state string, version int64) {
	e.t.Helper()
	s, v := e.object(key)
	require.Equal(e.t, state, s, "object %s state", key)
	require.Equal(e.t, ordVer(&version), ordVer(v), "object %s version", key)
	kv := e.key(key)
	require.Equal(e.t, ordVer(&version), ordVer(kv.Version), "key %s version", key)
}

func (e *env) key(key string) store.KeyView {
	e.t.Helper()
	kv, err := e.st.Executor().KeyViewGet(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(e.t, err, "key %s", key)
	return kv
}

// requireKey checks a key's ordering state and what is parked behind it.
func (e *env) requireKey(key string, version *int64, blocked bool, held, blockedCount int) store.KeyView {
	e.t.Helper()
	kv := e.key(key)
	require.Equal(e.t, ordVer(version), ordVer(kv.Version), "key %s version", key)
	require.Equal(e.t, blocked, kv.Blocked, "key %s blocked", key)
	require.Equal(e.t, held, kv.Held, "key %s held", key)
	require.Equal(e.t, blockedCount, kv.BlockedCount, "key %s blocked messages", key)
	return kv
}

// audit lists the consumer's audit rows of key (of every key when empty),
// oldest first.
func (e *env) audit(key string) []store.AuditRow {
	e.t.Helper()
	rows, err := e.st.Executor().AuditList(e.ctx, store.AuditListParams{Consumer: e.cfg.Name, Key: key, Limit: 1000})
	require.NoError(e.t, err)
	return rows
}

// duplicates is how often the identities with this id (every identity of
// the consumer when id is empty) were delivered again: counted on their
// inbox rows, not in the audit.
func (e *env) duplicates(id string) int {
	e.t.Helper()
	q := `SELECT COALESCE(SUM(duplicates), 0) FROM seqbox_inbox WHERE consumer = $1`
	args := []any{e.cfg.Name}
	if id != "" {
		q += ` AND id = $2`
		args = append(args, id)
	}
	var n int
	require.NoError(e.t, e.st.DB().QueryRowContext(e.ctx, q, args...).Scan(&n))
	return n
}

// inboxOutcome reads the outcome recorded for an identity straight from
// the inbox table ("" when the identity is not recorded).
func (e *env) inboxOutcome(source, id string) string {
	e.t.Helper()
	var out string
	err := e.st.DB().QueryRowContext(e.ctx, `SELECT outcome FROM seqbox_inbox WHERE consumer = $1 AND source = $2 AND id = $3`,
		e.cfg.Name, source, id).Scan(&out)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	require.NoError(e.t, err)
	return out
}

// auditLines renders a key's audit rows as "id outcome received/current".
// A duplicate is decided by the inbox before the ordering gate reads the
// key, so only its received version is part of its evidence.
func (e *env) auditLines(key string) []string {
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
func (e *env) auditRow(key, id string, outcome seqboxtype.Outcome) store.AuditRow {
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
func (e *env) gapLines(key string) []string {
	e.t.Helper()
	out := []string{}
	for _, g := range e.gaps(key) {
		require.Equal(e.t, key, g.Key)
		out = append(out, fmt.Sprintf("%d-%d by %s", g.FromVersion, g.ToVersion, g.DecidedBy))
	}
	return out
}

// gaps lists a key's recorded gaps.
func (e *env) gaps(key string) []store.Gap {
	e.t.Helper()
	gs, err := e.st.Executor().GapList(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(e.t, err)
	return gs
}

// counts is the consumer's state in numbers.
func (e *env) counts() store.Counts {
	e.t.Helper()
	c, err := e.st.Executor().Counts(e.ctx, e.cfg.Name)
	require.NoError(e.t, err)
	return c
}

// parked lists what is parked behind a key (every key when empty).
func (e *env) parked(key string) []store.Parked {
	e.t.Helper()
	ps, err := e.st.Executor().ParkedList(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: key})
	require.NoError(e.t, err)
	return ps
}

// deadLetters lists the consumer's DLQ, resolved rows too when all is set.
func (e *env) deadLetters(all bool) []store.DeadLetter {
	e.t.Helper()
	ds, err := e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: e.cfg.Name, All: all})
	require.NoError(e.t, err)
	return ds
}

// requireNothingParked checks that no held or blocked message was lost or
// left behind.
func (e *env) requireNothingParked() {
	e.t.Helper()
	c := e.counts()
	require.Zero(e.t, c.Parked, "parked messages left: %+v", e.parked(""))
	require.Zero(e.t, c.Held)
	require.Zero(e.t, c.Blocked)
}
