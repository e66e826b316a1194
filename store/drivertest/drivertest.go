// Package drivertest is the driver suite every seqbox store passes: it
// calls the store's Tx, Operator and Control methods directly, one by one,
// without the pipeline (seqbox.Consumer), in the way river's
// riverdrivertest does. storetest says what the pipeline does with a store;
// drivertest says what each store method does, so that a broken statement
// is named by the method it belongs to.
//
// Isolation. Every Tx test is a parallel subtest that runs in a
// transaction of its own, rolled back when the subtest ends, under a
// consumer name of its own ("tx:" and the test's name): nothing it writes
// is seen by another subtest, and nothing is left behind, which the suite
// checks at the end. Operator and Control work through the pool, outside
// any batch transaction, so they cannot see what a transaction that will
// be rolled back wrote: their tests commit what they set up and keep apart
// by a consumer name of their own ("op:" and the test's name) instead, and
// filter what they list that every consumer shares (registrations).
//
// One writer. SQLite has one writer at a time, and the store's Begin
// serializes this process's transactions, so parallel subtests on one
// store queue for it. A subtest never writes through the pool while it
// holds a transaction, and holds two transactions at once only in the
// Locks tests, where the second waits for the first and the first ends
// without waiting for anything: the queue always moves on. Every subtest
// also runs under a deadline, so a store that did deadlock fails instead
// of hanging.
//
// A store package runs it from its own test:
//
//	func TestDriver(t *testing.T) {
//		drivertest.Run(t, openFresh)
//	}
package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// Opener opens a fresh, empty store and arranges for it to be closed when
// the test it was given ends.
type Opener func(t *testing.T) store.Store

// Run runs the driver suite against one store that open makes, shared by
// every subtest, in groups that run one after the other, the tests of
// each group in parallel: the Tx tests, each in a transaction it rolls
// back; then the Operator, Control and Locks tests, each on committed rows
// of a consumer of its own; and last a check that the Tx tests left no row
// behind.
func Run(t *testing.T, open Opener) {
	st := open(t)
	t.Run("Tx", func(t *testing.T) {
		for _, tests := range [][]driverTest{txTests, effectTests, outboxTests, gatewayTests} {
			runAll(t, st, tests)
		}
		if pipelines(t, st) {
			runAll(t, st, []driverTest{{"Pipeline", testPipeline}, {"PipelineAudit", testPipelineAudit},
				{"PipelineRead", testPipelineRead}, {"PipelineKeyLockInsert", testPipelineKeyLockInsert}, {"PipelineKeyAdvance", testPipelineKeyAdvance},
				{"PipelineDecide", testPipelineDecide},
				{"PipelineGatewayEnvelope", testPipelineGatewayEnvelope}})
		}
	})
	t.Run("Operator", func(t *testing.T) { runAll(t, st, operatorTests) })
	t.Run("Control", func(t *testing.T) { runAll(t, st, controlTests) })
	t.Run("Locks", func(t *testing.T) { runAll(t, st, lockTests) })
	t.Run("TxTestsLeaveNothingBehind", func(t *testing.T) { requireNothingLeft(t, st) })
}

// driverTest is one named test of the suite.
type driverTest struct {
	name string
	run  func(t *testing.T, st store.Store)
}

// txTests call the store.ExecutorTx methods, each in a transaction it
// rolls back (with effectTests, outboxTests and gatewayTests).
var txTests = []driverTest{
	{"SQLIsTheBatchTransaction", testSQL},
	{"Savepoints", testSavepoints},
	{"RollbackDiscards", testRollbackDiscards},
	{"InsertInbox", testInsertInbox},
	{"InboxInsertMany", testInsertInboxes},
	{"InboxList", testInboxList},
	{"InsertInboxesEmpty", testInsertInboxesEmpty},
	{"InsertInboxesManyConsumers", testInsertInboxesManyConsumers},
	{"SetInboxOutcome", testSetInboxOutcome},
	{"InboxSetOutcomeMany", testSetInboxOutcomes},
	{"DeleteInbox", testDeleteInbox},
	{"ClaimBusinessKey", testClaimBusinessKey},
	{"KeyAndEnsureKey", testKeyAndEnsureKey},
	{"KeyFlags", testKeyFlags},
	{"AdvanceKey", testAdvanceKey},
	{"KeyAdvanceMany", testAdvanceKeys},
	{"KeyBlock", testBlockKey},
	{"KeyLockMany", testLockKeys},
	{"LockKeysEmpty", testLockKeysEmpty},
	{"KeyEnsureMany", testEnsureKeys},
	{"ParkedInsert", testPark},
	{"ParkCollisionOnce", testParkCollisionOnce},
	{"ParkedForKeyOrder", testParkedForKeyOrder},
	{"ParkedDelete", testUnpark},
	{"ParkedSetReason", testSetParkedReason},
	{"ParkedStartHolds", testStartHolds},
	{"ParkedRehold", testRehold},
	{"RetryRecord", testRecordRetry},
	{"RetryClear", testClearRetry},
	{"RetryClearMany", testClearRetries},
	{"InboxGetMany", testInboxGetMany},
	{"RetryOnKey", testRetryingOnKey},
	{"RetryRowsOnKeys", testRetryRowsOnKeys},
	{"DeadLetter", testDeadLetter},
	{"DeadLetterResolve", testResolveDeadLetter},
	{"DeadLetterKeepsItsNumber", testDeadLetterKeepsItsNumber},
	{"AuditDuplicate", testAuditDuplicate},
	{"AuditOnce", testAuditOnce},
	{"GapInsert", testRecordGap},
	{"DecisionGet", testDecision},
	{"TurnTakeBound", testTurnTakeBound},
	{"TurnWaits", testTurnWaits},
	{"BusinessKeyTouched", testBusinessKeyTouched},
	{"BusinessKeyInFlight", testBusinessKeyInFlight},
	{"BusinessKeyTouchedByEachOutcome", testBusinessKeyTouchedByEachOutcome},
	{"TurnOfAParkedOrDeadLetteredHolder", testTurnOfAParkedOrDeadLetteredHolder},
	{"ManyReads", testManyReads},
	{"TakeMany", testTakeMany},
	{"DecisionLook", testDecisionLook},
	{"DecisionClaimLiveEndsWhereATakeOverMay", testDecisionClaimLiveEndsWhereATakeOverMay},
	{"DecisionClaimManyLeavesALiveClaimEndingFirst", testDecisionClaimManyLeavesALiveClaimEndingFirst},
}

// runAll runs tests as subtests of t; each one is parallel.
func runAll(t *testing.T, st store.Store, tests []driverTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, st) })
	}
}

// deadline bounds every subtest, so that a store whose transactions wait
// for each other fails the test instead of hanging it.
const deadline = 2 * time.Minute

// testContext marks t parallel and returns a context that ends at the
// subtest's deadline or when it ends.
func testContext(t *testing.T) context.Context {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// txEnv is one Tx test: its transaction, rolled back when the test ends,
// and its own consumer name.
type txEnv struct {
	t        *testing.T
	ctx      context.Context
	st       store.Store
	tx       store.ExecutorTx
	consumer string
}

// txPrefix starts the consumer names of Tx tests.
const txPrefix = "tx:"

// beginTx marks t parallel, begins its transaction and rolls it back
// when t ends.
func beginTx(t *testing.T, st store.Store) *txEnv {
	t.Helper()
	ctx := testContext(t)
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.Errorf("rollback: %v", err)
		}
	})
	return &txEnv{t: t, ctx: ctx, st: st, tx: tx, consumer: txPrefix + t.Name()}
}

// count counts the rows of table that belong to the test's consumer and
// match where (which may name $2, $3, … for args), inside the transaction.
func (e *txEnv) count(table, where string, args ...any) int {
	e.t.Helper()
	q := `SELECT COUNT(*) FROM ` + table + ` WHERE consumer = $1`
	if where != "" {
		q += ` AND ` + where
	}
	var n int
	require.NoError(e.t, e.tx.SQL().QueryRowContext(e.ctx, q, append([]any{e.consumer}, args...)...).Scan(&n))
	return n
}

// column returns what reads the one column of a query's rows (or fails t
// with its error) as values of T; it takes the query's two results as
// they come, so a caller writes the query inside its call.
func column[T any](t *testing.T) func(rows *sql.Rows, err error) []T {
	return func(rows *sql.Rows, err error) []T {
		t.Helper()
		require.NoError(t, err)
		defer rows.Close()
		out := []T{}
		for rows.Next() {
			var v T
			require.NoError(t, rows.Scan(&v))
			out = append(out, v)
		}
		require.NoError(t, rows.Err())
		return out
	}
}

// key reads a key through Tx.Key, which must find it.
func (e *txEnv) key(key string) store.KeyState {
	e.t.Helper()
	k, err := e.tx.KeyLock(e.ctx, store.KeyRef{Consumer: e.consumer, Key: key})
	require.NoError(e.t, err, "key %q", key)
	return k
}

// ensureKeys creates keys through EnsureKey.
func (e *txEnv) ensureKeys(at time.Time, keys ...string) {
	e.t.Helper()
	for _, k := range keys {
		require.NoError(e.t, e.tx.KeyEnsure(e.ctx, store.KeyEnsureParams{Consumer: e.consumer, Key: k, At: at}))
	}
}

// seqboxTables are the tables whose rows belong to a consumer.
var seqboxTables = []string{
	"seqbox_inbox", "seqbox_business_keys", "seqbox_keys", "seqbox_parked", "seqbox_retries",
	"seqbox_dlq", "seqbox_audit", "seqbox_gaps", "seqbox_decisions", "seqbox_effects",
	"seqbox_gateway_envelopes", "seqbox_gateway_tombstones", "seqbox_gateway_accepted",
}

// requireNothingLeft checks, through the pool, that no Tx test left a row
// in any of seqbox's tables.
func requireNothingLeft(t *testing.T, st store.Store) {
	ctx := testContext(t)
	for _, table := range seqboxTables {
		var n int
		require.NoError(t, st.DB().QueryRowContext(ctx,
			`SELECT COUNT(*) FROM `+table+` WHERE consumer LIKE $1`, txPrefix+"%").Scan(&n))
		require.Zero(t, n, "%s holds %d rows of Tx tests, which roll back", table, n)
	}
}

// base is the time every test's times are made from: microsecond
// precision, in UTC, as the stores keep them.
var base = time.Date(2025, time.June, 1, 12, 0, 0, 123456000, time.UTC)

// at is base plus n seconds.
func at(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
