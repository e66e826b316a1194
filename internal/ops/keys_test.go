package ops

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// fakeExecutor answers the queries Reporter makes from fixed rows.
type fakeExecutor struct {
	store.Executor // any other query panics
	views          []store.KeyView
	parked         map[string][]store.Parked
	dlq            []store.DeadLetter
	turns          map[string]store.RetryRow
}

func (f fakeExecutor) RetryOnKey(_ context.Context, p store.KeyRef) (store.RetryRow, error) {
	if r, ok := f.turns[p.Key]; ok {
		return r, nil
	}
	return store.RetryRow{}, store.ErrNotFound
}

func (f fakeExecutor) RetryRowsOnKeys(_ context.Context, p store.KeysRef) (map[string][]store.Identity, error) {
	out := map[string][]store.Identity{}
	for _, k := range p.Keys {
		if r, ok := f.turns[k]; ok {
			out[k] = append(out[k], store.Identity{Source: r.Source, ID: r.ID})
		}
	}
	return out, nil
}

func (f fakeExecutor) KeyViewList(context.Context, store.KeyViewListParams) ([]store.KeyView, error) {
	return f.views, nil
}

func (f fakeExecutor) ParkedList(_ context.Context, p store.KeyRef) ([]store.Parked, error) {
	return f.parked[p.Key], nil
}

func (f fakeExecutor) ParkedPage(_ context.Context, p store.ParkedPageParams) ([]store.Parked, error) {
	var out []store.Parked
	for _, m := range f.parked[p.Key] {
		if (p.Reason == "" || m.Reason == p.Reason) && len(out) < p.Limit {
			out = append(out, m)
		}
	}
	return out, nil
}

func (f fakeExecutor) DeadLetterList(context.Context, store.DeadLetterListParams) ([]store.DeadLetter, error) {
	return f.dlq, nil
}

func ptr(v int64) *int64 { return &v }

func TestReporterAdvice(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	op := fakeExecutor{
		views: []store.KeyView{
			// Blocked by a gap, with a name a shell would split.
			{KeyState: store.KeyState{Key: "order 7's", Version: ptr(4), Blocked: true, BlockedReason: "hold timed out",
				BlockedSince: t0}, BlockedCount: 1, NextVersion: ptr(6)},
			// Blocked behind a message whose DLQ row is not open any more.
			{KeyState: store.KeyState{Key: "B", Version: ptr(1), Blocked: true, BlockedSource: "s", BlockedID: "b2",
				BlockedReason: "dead-lettered b2", BlockedSince: t0}, BlockedCount: 1, NextVersion: ptr(3)},
			// Held behind a predecessor that is retrying: no hold deadline.
			{KeyState: store.KeyState{Key: "C", Version: ptr(9)}, Held: 1, OldestParked: t0, NextVersion: ptr(10)},
			// Held on a gap, first version policy, no version yet; deadline passed.
			{KeyState: store.KeyState{Key: "D"}, Held: 1, OldestParked: t0, NextVersion: ptr(3)},
		},
		parked: map[string][]store.Parked{
			"C": {{Reason: seqboxtype.ParkHeld, Detail: "waiting behind s/c10, which is retrying", ObjectVersion: ptr(10)}},
			"D": {{Reason: seqboxtype.ParkHeld, Detail: "waiting for version 1 (got 3)", ObjectVersion: ptr(3),
				HoldUntil: t0.Add(time.Minute)}},
		},
		dlq:   []store.DeadLetter{{Seq: 7, Source: "s", ID: "other"}},
		turns: map[string]store.RetryRow{"C": {Source: "s", ID: "c10", At: t0, Error: "503 from the model"}},
	}
	r := Reporter{Op: op, Consumer: "c", FirstVersion: ptr(1), Now: t0.Add(2 * time.Minute), DB: "/tmp/x/seqbox.db"}
	reps, err := r.Keys(context.Background(), false)
	require.NoError(t, err)

	var b bytes.Buffer
	require.NoError(t, WriteKeys(&b, reps, Text))
	require.Equal(t, ""+
		"PARTITIONKEY  STATUS   VERSION  EXPECTED  LOWEST_PARKED  HELD  BLOCKED_MESSAGES  SINCE                 REASON                                   ACTION\n"+
		"order 7's     blocked  4        5         6              0     1                 2026-01-02T03:04:05Z  hold timed out                           seqbox keys release 'order 7'\\''s' --by WHO --reason WHY --db /tmp/x/seqbox.db --consumer c\n"+
		"B             blocked  1        2         3              0     1                 2026-01-02T03:04:05Z  dead-lettered b2                         seqbox keys release B --by WHO --reason WHY --db /tmp/x/seqbox.db --consumer c\n"+
		"C             held     9        10        10             1     0                 2026-01-02T03:04:05Z  waiting behind s/c10, which is retrying  wait for s/c10, which holds the key's turn (last seen 2026-01-02T03:04:05Z); the sweep ends its turn once the broker's redelivery window passes without it, or: seqbox keys release C --by WHO --reason WHY --db /tmp/x/seqbox.db --consumer c\n"+
		"D             held     -        1         3              1     0                 2026-01-02T03:04:05Z  waiting for version 1 (got 3)            wait for version 1 until 2026-01-02T03:05:05Z (overdue: the next sweep applies the hold expiry)\n",
		b.String())

	require.Equal(t, &Blocker{Source: "s", ID: "b2"}, reps[1].BlockedBy)
	require.Equal(t, &TurnHolder{Source: "s", ID: "c10", LastSeen: "2026-01-02T03:04:05Z", LastError: "503 from the model"}, reps[2].Turn)
	require.Nil(t, reps[3].Turn, "a hold on a gap has no turn")
}

func TestTableKeepsCellsOnOneLine(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "A", "B")
	tb.row("x\ty", "line one\nline two")
	// A bidi override would reorder what follows it on the terminal; a
	// zero-width space would hide inside the text.
	tb.row("evil\u202etxt.exe", "zero\u200bwidth")
	require.NoError(t, tb.flush())
	require.Equal(t, ""+
		"A                  B\n"+
		"x\\u0009y           line one\\u000aline two\n"+
		"evil\\u202etxt.exe  zero\\u200bwidth\n",
		b.String())
}
