package chaos

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// v is an apply of key's version n, identity chaos/<key>-v<n>.
func v(key string, n int64) Apply {
	return Apply{Source: "chaos", ID: key + "-v" + itoa(n), Key: key, Version: n, Versioned: true}
}

// u is an unversioned apply of key under id.
func u(key, id string) Apply { return Apply{Source: "chaos", ID: id, Key: key} }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func bk(a Apply, key string) Apply { a.BusinessKey = key; return a }

func one() *int64 { n := int64(1); return &n }

func gaps(spans ...[3]any) *Accounting {
	a := &Accounting{}
	for _, s := range spans {
		a.AddGap(s[0].(string), int64(s[1].(int)), int64(s[2].(int)))
	}
	return a
}

func TestHistoryGood(t *testing.T) {
	for _, c := range []struct {
		name string
		h    []Apply
		spec HistorySpec
	}{
		{"empty", nil, HistorySpec{FirstVersion: one()}},
		{"in order, keys interleaved", []Apply{v("a", 1), v("b", 1), v("a", 2), u("", "free-1"), v("b", 2), v("a", 3)},
			HistorySpec{FirstVersion: one()}},
		{"a gap recorded", []Apply{v("a", 1), v("a", 4)}, HistorySpec{FirstVersion: one(), Accounted: gaps([3]any{"a", 2, 3})}},
		{"a gap covered by pieces", []Apply{v("a", 1), v("a", 5)},
			HistorySpec{Accounted: gaps([3]any{"a", 2, 2}, [3]any{"a", 3, 4}, [3]any{"b", 1, 9})}},
		{"versions before the first apply accounted", []Apply{v("a", 3)},
			HistorySpec{FirstVersion: one(), Accounted: gaps([3]any{"a", 1, 2})}},
		{"no FirstVersion: the first version seen is the baseline", []Apply{v("a", 41), v("a", 42)}, HistorySpec{}},
		{"business keys once each", []Apply{bk(u("", "free-1"), "effect:1"), bk(u("", "free-2"), "effect:2")}, HistorySpec{}},
		{"publish order, with events that never applied", []Apply{u("k", "e1"), u("k", "e3"), u("k", "e4")},
			HistorySpec{PublishOrder: map[string][]string{"k": {"chaos/e1", "chaos/e2", "chaos/e3", "chaos/e3", "chaos/e4"}}}},
		{"unversioned applies between versions", []Apply{v("a", 1), u("a", "x"), v("a", 2)}, HistorySpec{FirstVersion: one()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Empty(t, CheckHistory(c.h, c.spec))
		})
	}
}

func TestHistoryBad(t *testing.T) {
	for _, c := range []struct {
		name string
		h    []Apply
		spec HistorySpec
		// want: each violation must contain these, in this order.
		want [][]string
	}{
		{"an identity applied twice", []Apply{v("a", 1), v("b", 1), v("a", 1)}, HistorySpec{},
			[][]string{{"key a: chaos/a-v1 applied twice: apply #1 chaos/a-v1 (v1) and apply #3 chaos/a-v1 (v1)"},
				{"key a: apply #3 chaos/a-v1 (v1) after apply #1 chaos/a-v1 (v1): versions must strictly increase"}}},
		{"a keyless identity applied twice", []Apply{u("", "free-1"), u("", "free-1")}, HistorySpec{},
			[][]string{{"no key: chaos/free-1 applied twice", "apply #1", "apply #2"}}},
		{"a business key under two identities", []Apply{bk(u("", "free-1"), "effect:1"), v("a", 1), bk(u("r", "free-1-again"), "effect:1")}, HistorySpec{},
			[][]string{{`business key "effect:1" applied under two identities: apply #1 chaos/free-1 (no version) on no key and apply #3 chaos/free-1-again (no version) on key r`}}},
		{"versions going back", []Apply{v("a", 1), v("a", 3), v("a", 2), v("a", 4)}, HistorySpec{Accounted: gaps([3]any{"a", 2, 2})},
			[][]string{{"key a: apply #3 chaos/a-v2 (v2) after apply #2 chaos/a-v3 (v3): versions must strictly increase"}}},
		{"one version under two identities", []Apply{v("a", 1), {Source: "chaos", ID: "other", Key: "a", Version: 1, Versioned: true}}, HistorySpec{},
			[][]string{{"key a: apply #2 chaos/other (v1) after apply #1 chaos/a-v1 (v1)"}}},
		{"a version silently missing", []Apply{v("a", 1), v("b", 1), v("a", 5)}, HistorySpec{Accounted: gaps([3]any{"a", 3, 3}, [3]any{"b", 4, 4})},
			[][]string{{"key a: versions v2, v4 never applied between apply #1 chaos/a-v1 (v1) and apply #3 chaos/a-v5 (v5)", "no gap"}}},
		{"a gap of another key accounts for nothing", []Apply{v("a", 1), v("a", 3)}, HistorySpec{Accounted: gaps([3]any{"b", 2, 2})},
			[][]string{{"key a: version v2 never applied between apply #1 chaos/a-v1 (v1) and apply #2 chaos/a-v3 (v3)"}}},
		{"versions missing before the first apply", []Apply{v("a", 4)}, HistorySpec{FirstVersion: one(), Accounted: gaps([3]any{"a", 2, 2})},
			[][]string{{"key a: versions v1, v3 never applied before apply #1 chaos/a-v4 (v4), the key's first (FirstVersion 1)"}}},
		{"below FirstVersion", []Apply{v("a", 0), v("a", 1)}, HistorySpec{FirstVersion: one()},
			[][]string{{"key a: apply #1 chaos/a-v0 (v0) is below the consumer's FirstVersion 1"}}},
		{"against the publish order", []Apply{u("k", "e2"), u("j", "x"), u("k", "e1")},
			HistorySpec{PublishOrder: map[string][]string{"k": {"chaos/e1", "chaos/e2"}}},
			[][]string{{"key k: apply #3 chaos/e1 (no version) (published 1st) after apply #1 chaos/e2 (no version) (published 2nd)"}}},
		{"never published under its key", []Apply{u("k", "e1"), u("k", "stray")},
			HistorySpec{PublishOrder: map[string][]string{"k": {"chaos/e1"}}},
			[][]string{{"key k: apply #2 chaos/stray (no version) was never published under this key"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CheckHistory(c.h, c.spec)
			require.Len(t, got, len(c.want), "violations: %q", got)
			for i, parts := range c.want {
				rest := got[i]
				for _, p := range parts {
					j := strings.Index(rest, p)
					require.GreaterOrEqual(t, j, 0, "violation %q lacks %q", got[i], p)
					rest = rest[j+len(p):]
				}
			}
		})
	}
}

func TestHistoryUncovered(t *testing.T) {
	a := gaps([3]any{"a", 3, 4}, [3]any{"a", 4, 6}, [3]any{"a", 9, 9}, [3]any{"a", 20, 30})
	require.Equal(t, []span{{1, 2}, {7, 8}, {10, 12}}, a.uncovered("a", 1, 12))
	require.Nil(t, a.uncovered("a", 3, 6))
	require.Nil(t, a.uncovered("a", 5, 4), "an empty range")
	require.Equal(t, []span{{1, 3}}, a.uncovered("b", 1, 3))
	require.Equal(t, []span{{1, 3}}, (*Accounting)(nil).uncovered("a", 1, 3))
	require.Equal(t, "1st 2nd 3rd 4th 11th 12th 13th 21st 112th", strings.Join([]string{ordinal(1), ordinal(2), ordinal(3),
		ordinal(4), ordinal(11), ordinal(12), ordinal(13), ordinal(21), ordinal(112)}, " "))
}

// A history violation fails the scenario and shows under the table.
func TestHistoryViolationFailsTheScenario(t *testing.T) {
	res := Result{Scenario: "random"}
	reportHistory(&res, "history", CheckHistory([]Apply{v("a", 2), v("a", 1)}, HistorySpec{}))
	require.False(t, res.Passed())
	require.Equal(t, 1, res.HistoryViolations)
	var out strings.Builder
	require.Equal(t, 1, WriteTable(&out, []Result{res}))
	require.Contains(t, out.String(), "  random: history: key a: apply #2 chaos/a-v1 (v1) after apply #1 chaos/a-v2 (v2)")
}

// The loaders read a store: the record handler's effects in commit order
// with their business keys, and every kind of accounting.
func TestHistoryFromTheDatabase(t *testing.T) {
	ctx := context.Background()
	st, err := dbopen.Store(ctx, filepath.Join(t.TempDir(), "h.db"))
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, ensureTables(ctx, st.DB()))
	for _, e := range []struct {
		id, key string
		v       any
	}{{"a-v1", "a", 1}, {"free-1", "", nil}, {"a-v7", "a", 7}} {
		_, err := st.DB().ExecContext(ctx, `INSERT INTO seqbox_record_effects (consumer, source, id, partitionkey, objectversion, type)
			VALUES ($1, 'chaos', $2, $3, $4, 't')`, Consumer, e.id, e.key, e.v)
		require.NoError(t, err)
	}
	h, err := effectHistory(ctx, st.DB(), Consumer, map[string]string{"chaos/free-1": "effect:1"})
	require.NoError(t, err)
	require.Equal(t, []Apply{v("a", 1), bk(u("", "free-1"), "effect:1"), v("a", 7)}, h)
	require.Equal(t, []string{"key a: versions v2-v6 never applied between apply #1 chaos/a-v1 (v1) and apply #3 chaos/a-v7 (v7), " +
		"and the database accounts for it by no gap, skip, dead letter or stale, expired or semantic_duplicate outcome"},
		CheckHistory(h, HistorySpec{FirstVersion: one()}))

	ex, now := st.Executor(), time.Now()
	require.NoError(t, ex.GapInsert(ctx, store.Gap{Consumer: Consumer, Key: "a", FromVersion: 2, ToVersion: 2, DecidedBy: "op", Reason: "skip", At: now}))
	four := int64(4)
	_, err = ex.DeadLetterInsert(ctx, store.DeadLetter{Consumer: Consumer, Source: "chaos", ID: "a-v4", PartitionKey: "a",
		ObjectVersion: &four, Envelope: []byte("{}"), Reason: "permanent", Attempts: 1, DeadAt: now})
	require.NoError(t, err)
	for i, o := range []seqboxtype.Outcome{seqboxtype.Stale, seqboxtype.Expired, seqboxtype.SemanticDuplicate, seqboxtype.Duplicate} {
		n := int64(3 + 2*i) // 3, 5, 7 (applied too), 9 (a duplicate accounts for nothing)
		_, err := ex.InboxInsert(ctx, store.InboxRow{Consumer: Consumer, Source: "chaos", ID: "x" + itoa(n), PayloadHash: "h", EventType: "t",
			PartitionKey: "a", ObjectVersion: &n, Outcome: o, ReceivedAt: now, RetentionUntil: now.Add(time.Hour)})
		require.NoError(t, err)
	}
	acc, err := loadAccounting(ctx, st, Consumer)
	require.NoError(t, err)
	require.Nil(t, acc.uncovered("a", 2, 5))
	require.Equal(t, []span{{6, 6}, {8, 9}}, acc.uncovered("a", 2, 9))
	require.Equal(t, []span{{2, 2}}, acc.uncovered("b", 2, 2))
	other, err := loadAccounting(ctx, st, chainConsumer)
	require.NoError(t, err)
	require.Equal(t, []span{{2, 5}}, other.uncovered("a", 2, 5), "another consumer's records account for nothing")
}
