package drivertest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// controlTests call the store.Executor methods under a consumer of their
// own; registrations are shared by every consumer, so what they list is
// filtered to the test's.
var controlTests = []driverTest{
	{"Register", testRegister},
	{"ConsumerRegister/UnwrapTx", testRegisterTx},
	{"Requests", testRequests},
}

// Register records a consumer's registration and replaces it, keeping
// the last heartbeat when the new one has none; Heartbeat moves it;
// ConsumerList lists every consumer by name.
func testRegister(t *testing.T, st store.Store) {
	o := newOp(t, st)
	c := st.Executor()
	_, err := c.ConsumerGet(o.ctx, o.consumer)
	require.ErrorIs(t, err, store.ErrNotFound)

	r := store.Registration{Consumer: o.consumer, HandlerKind: store.HandlerApplication,
		Policies: []byte(`{"ordering":"strict"}`), Process: "host-a:100", StartedAt: at(1)}
	require.NoError(t, c.ConsumerRegister(o.ctx, r))
	got, err := c.ConsumerGet(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Equal(t, r, got, "no heartbeat yet: zero")

	r = store.Registration{Consumer: o.consumer, HandlerKind: store.HandlerRecord,
		Policies: []byte(`{"ordering":"none"}`), Process: "host-b:200", StartedAt: at(2), HeartbeatAt: at(3)}
	require.NoError(t, c.ConsumerRegister(o.ctx, r))
	got, err = c.ConsumerGet(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Equal(t, r, got, "the last writer wins")

	r2 := r
	r2.Process, r2.StartedAt, r2.HeartbeatAt = "host-c:300", at(4), time.Time{}
	require.NoError(t, c.ConsumerRegister(o.ctx, r2))
	got, err = c.ConsumerGet(o.ctx, o.consumer)
	require.NoError(t, err)
	r2.HeartbeatAt = at(3)
	require.Equal(t, r2, got, "a registration without a heartbeat keeps the last one")

	require.NoError(t, c.ConsumerHeartbeat(o.ctx, store.ConsumerHeartbeatParams{Consumer: o.consumer, At: at(9)}))
	got, err = c.ConsumerGet(o.ctx, o.consumer)
	require.NoError(t, err)
	r2.HeartbeatAt = at(9)
	require.Equal(t, r2, got)
	require.NoError(t, c.ConsumerHeartbeat(o.ctx, store.ConsumerHeartbeatParams{Consumer: o.consumer + "/never", At: at(9)}), "a heartbeat of nobody")
	_, err = c.ConsumerGet(o.ctx, o.consumer+"/never")
	require.ErrorIs(t, err, store.ErrNotFound, "a heartbeat registers nobody")

	second := store.Registration{Consumer: o.consumer + "/B", HandlerKind: store.HandlerApplication,
		Policies: []byte(`{}`), Process: "host-d:1", StartedAt: at(5)}
	require.NoError(t, c.ConsumerRegister(o.ctx, second))
	all, err := c.ConsumerList(o.ctx)
	require.NoError(t, err)
	require.True(t, slices.IsSortedFunc(all, func(a, b store.Registration) int { return strings.Compare(a.Consumer, b.Consumer) }),
		"by name, in byte order")
	var mine []store.Registration
	for _, r := range all {
		if r.Consumer == o.consumer || r.Consumer == second.Consumer {
			mine = append(mine, r)
		}
	}
	require.Equal(t, []store.Registration{r2, second}, mine)
}

// ConsumerRegister through UnwrapTx registers inside the caller's
// transaction: it rolls back and commits with it.
func testRegisterTx(t *testing.T, st store.Store) {
	o := newOp(t, st)
	c := st.Executor()
	r := store.Registration{Consumer: o.consumer, HandlerKind: store.HandlerApplication,
		Policies: []byte(`{"ordering":"strict"}`), Process: "host-a:100", StartedAt: at(1), HeartbeatAt: at(2)}
	for _, commit := range []bool{false, true} {
		tx, err := st.DB().BeginTx(o.ctx, nil)
		require.NoError(t, err)
		require.NoError(t, st.UnwrapTx(tx).ConsumerRegister(o.ctx, r))
		if commit {
			require.NoError(t, tx.Commit())
		} else {
			require.NoError(t, tx.Rollback())
		}
		got, err := c.ConsumerGet(o.ctx, o.consumer)
		if !commit {
			require.ErrorIs(t, err, store.ErrNotFound, "rolled back")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
}

// An operator request goes pending → running → done or failed, or
// pending → cancelled; each move happens once, from its one state.
func testRequests(t *testing.T, st store.Store) {
	o := newOp(t, st)
	c := st.Executor()
	reqs := []store.OperatorRequest{
		{Consumer: o.consumer, Action: store.ActionRedrive, Target: "17", RequestedBy: "ana", Reason: "fixed upstream", RequestedAt: at(1)},
		{Consumer: o.consumer, Action: store.ActionSkip, Target: "18", RequestedBy: "bob", RequestedAt: at(2)},
		{Consumer: o.consumer, Action: store.ActionRelease, Target: "order-7", RequestedBy: "ana", Reason: "lost", RequestedAt: at(3),
			State: seqboxtype.RequestDone, TakenBy: "ignored"}, // a new request is pending whatever it says
	}
	for i := range reqs {
		seq, err := c.RequestInsert(o.ctx, reqs[i])
		require.NoError(t, err)
		require.Positive(t, seq)
		if i > 0 {
			require.Greater(t, seq, reqs[i-1].Seq)
		}
		reqs[i].Seq, reqs[i].State, reqs[i].TakenBy = seq, seqboxtype.RequestPending, ""
	}
	read := func(seq int64) store.OperatorRequest {
		t.Helper()
		r, err := c.RequestGet(o.ctx, seq)
		require.NoError(t, err)
		return r
	}
	pending := func() []store.OperatorRequest {
		t.Helper()
		p, err := c.RequestListPending(o.ctx, o.consumer)
		require.NoError(t, err)
		return p
	}
	require.Equal(t, reqs, pending(), "oldest first")
	for _, r := range reqs {
		require.Equal(t, r, read(r.Seq))
	}
	none, err := c.RequestListPending(o.ctx, o.consumer+"/other")
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = c.RequestGet(o.ctx, reqs[2].Seq+1_000_000)
	require.ErrorIs(t, err, store.ErrNotFound)

	// Redrive: claimed once, then done with its decisions.
	ok, err := c.RequestClaim(o.ctx, store.RequestClaimParams{Seq: reqs[0].Seq, Taker: "host-a:100", At: at(10)})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = c.RequestClaim(o.ctx, store.RequestClaimParams{Seq: reqs[0].Seq, Taker: "host-b:200", At: at(11)})
	require.NoError(t, err)
	require.False(t, ok, "taken already")
	ok, err = c.RequestCancel(o.ctx, store.RequestCancelParams{Seq: reqs[0].Seq, Why: "too late", At: at(11)})
	require.NoError(t, err)
	require.False(t, ok, "a running request cannot be cancelled")
	require.Equal(t, reqs[1:], pending())
	running := reqs[0]
	running.State, running.TakenBy, running.TakenAt, running.AliveAt = seqboxtype.RequestRunning, "host-a:100", at(10), at(10)
	require.Equal(t, running, read(running.Seq))
	// Its taker's sign of life: renewed by the taker only, and a request
	// renewed since SilentSince is not abandoned.
	ok, err = c.RequestAlive(o.ctx, store.RequestAliveParams{Seq: running.Seq, Taker: "host-b:200", At: at(11)})
	require.NoError(t, err)
	require.False(t, ok, "another process's")
	ok, err = c.RequestAlive(o.ctx, store.RequestAliveParams{Seq: running.Seq, Taker: "host-a:100", At: at(11)})
	require.NoError(t, err)
	require.True(t, ok)
	running.AliveAt = at(11)
	listed, err := c.RequestListRunning(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Equal(t, []store.OperatorRequest{running}, listed)
	gone, err := c.RequestAbandon(o.ctx, store.RequestAbandonParams{Seq: running.Seq, AliveAt: at(10), Silent: 15 * time.Second, At: at(12)})
	require.NoError(t, err)
	require.False(t, gone, "renewed since at(10)")
	require.Equal(t, running, read(running.Seq))
	require.NoError(t, c.RequestFinish(o.ctx, store.RequestFinishParams{Seq: running.Seq, State: seqboxtype.RequestDone, Result: []byte(`[{"outcome":"applied"}]`), Error: "", At: at(12)}))
	done := running
	done.State, done.Result, done.DoneAt = seqboxtype.RequestDone, []byte(`[{"outcome":"applied"}]`), at(12)
	require.Equal(t, done, read(done.Seq))
	require.ErrorIs(t, c.RequestFinish(o.ctx, store.RequestFinishParams{Seq: done.Seq, State: seqboxtype.RequestFailed, Result: nil, Error: "again", At: at(13)}), store.ErrNotFound,
		"only a running request finishes")

	// Skip: cancelled while pending, once; then nobody takes it.
	require.ErrorIs(t, c.RequestFinish(o.ctx, store.RequestFinishParams{Seq: reqs[1].Seq, State: seqboxtype.RequestDone, Result: nil, Error: "", At: at(13)}), store.ErrNotFound,
		"a pending request does not finish")
	ok, err = c.RequestCancel(o.ctx, store.RequestCancelParams{Seq: reqs[1].Seq, Why: "nobody took it", At: at(14)})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = c.RequestCancel(o.ctx, store.RequestCancelParams{Seq: reqs[1].Seq, Why: "again", At: at(15)})
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = c.RequestClaim(o.ctx, store.RequestClaimParams{Seq: reqs[1].Seq, Taker: "host-a:100", At: at(15)})
	require.NoError(t, err)
	require.False(t, ok, "a cancelled request is not taken")
	cancelled := reqs[1]
	cancelled.State, cancelled.Error, cancelled.DoneAt = seqboxtype.RequestCancelled, "nobody took it", at(14)
	require.Equal(t, cancelled, read(cancelled.Seq))

	// Release: taken, then refused.
	ok, err = c.RequestClaim(o.ctx, store.RequestClaimParams{Seq: reqs[2].Seq, Taker: "host-a:100", At: at(16)})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, c.RequestFinish(o.ctx, store.RequestFinishParams{Seq: reqs[2].Seq, State: seqboxtype.RequestFailed, Result: nil, Error: "the key is not blocked", At: at(17)}))
	failed := reqs[2]
	failed.State, failed.TakenBy, failed.TakenAt, failed.AliveAt = seqboxtype.RequestFailed, "host-a:100", at(16), at(16)
	failed.Error, failed.DoneAt = "the key is not blocked", at(17)
	require.Equal(t, failed, read(failed.Seq))
	require.Empty(t, pending())

	// Abandoned: its sign of life unchanged since the abandoner saw it.
	silent := store.OperatorRequest{Consumer: o.consumer, Action: store.ActionSkip, Target: "18", RequestedBy: "ana",
		RequestedAt: at(20), State: seqboxtype.RequestPending}
	silent.Seq, err = c.RequestInsert(o.ctx, silent)
	require.NoError(t, err)
	ok, err = c.RequestClaim(o.ctx, store.RequestClaimParams{Seq: silent.Seq, Taker: "host-c:300", At: at(21)})
	require.NoError(t, err)
	require.True(t, ok)
	gone, err = c.RequestAbandon(o.ctx, store.RequestAbandonParams{Seq: silent.Seq, AliveAt: at(21), Silent: 16 * time.Second, At: at(37)})
	require.NoError(t, err)
	require.True(t, gone)
	got := read(silent.Seq)
	require.Equal(t, seqboxtype.RequestFailed, got.State)
	require.Equal(t, at(37), got.DoneAt)
	require.Contains(t, got.Error, "host-c:300")
	require.Contains(t, got.Error, "16s")
	require.Contains(t, got.Error, "run the command again")
	ok, err = c.RequestAlive(o.ctx, store.RequestAliveParams{Seq: silent.Seq, Taker: "host-c:300", At: at(38)})
	require.NoError(t, err)
	require.False(t, ok, "no longer running")
	require.ErrorIs(t, c.RequestFinish(o.ctx, store.RequestFinishParams{Seq: silent.Seq, State: seqboxtype.RequestDone, At: at(38)}), store.ErrNotFound)
	gone, err = c.RequestAbandon(o.ctx, store.RequestAbandonParams{Seq: silent.Seq, AliveAt: at(21), Silent: time.Minute, At: at(40)})
	require.NoError(t, err)
	require.False(t, gone, "once")
	listed, err = c.RequestListRunning(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Empty(t, listed)
}
