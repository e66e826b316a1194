package effects_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/remoteapi"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stores runs fn on a fresh SQLite store and a fresh PostgreSQL one.
func stores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.URL(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
}

// crm is the remote API and the call that creates a task there.
type crm struct {
	*remoteapi.Server
	client *http.Client
}

func newCRM(t *testing.T) *crm {
	s := remoteapi.Start()
	s.Hang = 2 * time.Second
	t.Cleanup(s.Close)
	return &crm{Server: s, client: &http.Client{Transport: &http.Transport{}}}
}

func (c *crm) create() effects.Call {
	return effects.HTTP(c.client, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/tasks", strings.NewReader(`{"title":"follow up"}`))
	}, func(resp *http.Response) (string, error) {
		var body struct{ ID string }
		err := json.NewDecoder(resp.Body).Decode(&body)
		return body.ID, err
	})
}

// reconcile looks the task up by idempotency key.
func (c *crm) reconcile(ctx context.Context, e effects.Effect) (effects.Reconciliation, error) {
	id, ok := c.Task(e.IdempotencyKey)
	return effects.Reconciliation{Applied: ok, Ref: id}, nil
}

var msg = seqboxtype.Identity{Consumer: "crm-worker", Source: "crm", ID: "evt-482"}

func state(t *testing.T, l *effects.Ledger) effects.Effect {
	t.Helper()
	es, err := l.List(context.Background(), effects.Filter{Consumer: msg.Consumer})
	require.NoError(t, err)
	require.Len(t, es, 1)
	return es[0]
}

func TestSucceededCallIsNotRepeated(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		l, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		ctx := context.Background()
		ref, err := l.DoFor(ctx, msg, "crm.create_task", c.create())
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		again, err := l.DoFor(ctx, msg, "crm.create_task", c.create())
		require.NoError(t, err)
		require.Equal(t, ref, again)
		req, applied, _ := c.Counts()
		require.Equal(t, 1, req, "a succeeded call is answered from the ledger")
		require.Equal(t, 1, applied)
		e := state(t, l)
		require.Equal(t, effects.Succeeded, e.State)
		require.Equal(t, effects.Key(msg.Consumer, msg.Source, msg.ID, "crm.create_task"), e.IdempotencyKey)
		_, ok := c.Task(e.IdempotencyKey)
		require.True(t, ok, "the remote side saw the ledger's idempotency key")
	})
}

// Each way a call can end without an answer leaves it uncertain, and the
// next attempt reconciles instead of calling blindly.
func TestUncertainCallsAreReconciledNotRepeated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   remoteapi.Fault
		applied bool
	}{
		{"response dropped after apply", remoteapi.DropAfterApply, true},
		{"hang past the timeout after apply", remoteapi.HangAfterApply, true},
		{"connection reset before apply", remoteapi.ResetBeforeApply, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores(t, func(t *testing.T, st store.Store) {
				c := newCRM(t)
				clock, now := movableClock()
				l, err := effects.New(st, effects.Config{Timeout: 500 * time.Millisecond, Reconcile: c.reconcile, Now: now})
				require.NoError(t, err)
				ctx := context.Background()
				c.Arm(tc.fault)
				_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
				var unc *effects.UncertainError
				require.ErrorAs(t, err, &unc)
				require.Equal(t, effects.Uncertain, state(t, l).State)
				if !tc.applied {
					// The remote side has nothing yet, but the call that
					// timed out may still be running there: too soon to call
					// again.
					_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
					require.ErrorAs(t, err, &unc)
					require.Contains(t, err.Error(), "may still be running")
					req, _, _ := c.Counts()
					require.Equal(t, 1, req, "not called again within a Timeout of the uncertain call")
					clock.Add((500 * time.Millisecond).Microseconds())
				}

				ref, err := l.DoFor(ctx, msg, "crm.create_task", c.create())
				require.NoError(t, err)
				req, applied, repeats := c.Counts()
				require.Equal(t, 1, applied, "exactly one task at the remote side")
				require.Zero(t, repeats)
				if tc.applied {
					require.Equal(t, 1, req, "reconciled from the remote record: no second call")
				} else {
					require.Equal(t, 2, req, "the remote side had nothing: called again, same key")
				}
				e := state(t, l)
				require.Equal(t, effects.Succeeded, e.State)
				require.NotNil(t, e.UncertainAt, "the call was uncertain once")
				require.NotNil(t, e.ReconciledAt, "and a reconciliation answered")
				require.Equal(t, "task-1", ref)
				require.Equal(t, ref, e.Ref)
			})
		})
	}
}

func TestUncertainWithoutReconcileWaitsForAnOperator(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		l, err := effects.New(st, effects.Config{Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		ctx := context.Background()
		c.Arm(remoteapi.DropAfterApply)
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)
		for range 3 {
			_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
			require.ErrorAs(t, err, &unc, "never re-executed blindly")
		}
		req, _, _ := c.Counts()
		require.Equal(t, 1, req)
		us, err := l.Uncertain(ctx)
		require.NoError(t, err)
		require.Len(t, us, 1)
		require.Equal(t, 1, us[0].Count)
		require.Equal(t, "crm.create_task", us[0].Action)

		key := state(t, l).IdempotencyKey
		require.ErrorContains(t, l.Resolve(ctx, key, effects.Succeeded, "task-1", "", ""), "who")
		require.ErrorContains(t, l.Resolve(ctx, "sbx-nope", effects.Succeeded, "x", "ana", "checked"), "no call")
		require.NoError(t, l.Resolve(ctx, key, effects.Succeeded, "task-1", "ana", "found it in the CRM"))
		require.ErrorContains(t, l.Resolve(ctx, key, effects.Failed, "", "ana", "again"), "not uncertain")
		ref, err := l.DoFor(ctx, msg, "crm.create_task", c.create())
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		req, applied, _ := c.Counts()
		require.Equal(t, 1, req)
		require.Equal(t, 1, applied)
	})
}

func TestDefiniteFailureMayBeCalledAgain(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		l, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		ctx := context.Background()
		c.Arm(remoteapi.Refuse)
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
		require.True(t, effects.IsDefinite(err), "a 400 is a definite failure: %v", err)
		e := state(t, l)
		require.Equal(t, effects.Failed, e.State)
		require.Contains(t, e.LastError, "400")
		ref, err := l.DoFor(ctx, msg, "crm.create_task", c.create())
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		e = state(t, l)
		require.Equal(t, 2, e.Calls)
	})
}

// A process that dies after sending leaves the row pending; the next
// attempt treats it as uncertain and reconciles.
func TestPendingFromADeadAttemptIsReconciled(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		clock, now := movableClock()
		l, err := effects.New(st, effects.Config{Reconcile: c.reconcile, Heartbeat: time.Hour, Now: now})
		require.NoError(t, err)
		ctx := context.Background()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = l.DoFor(ctx, msg, "crm.create_task", func(ctx context.Context, key string) (string, error) {
				_, err := c.create()(ctx, key) // the request reaches the remote side...
				if err != nil {
					return "", err
				}
				runtime.Goexit() // ...and the attempt dies before recording it
				return "", nil
			})
		}()
		<-done
		require.Equal(t, effects.Pending, state(t, l).State)
		// Its caller's heartbeat vouches for it: nobody calls again.
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
		var inFlight *effects.InFlightError
		require.ErrorAs(t, err, &inFlight)
		// The heartbeat stopped three heartbeats ago: the caller is dead.
		clock.Add((3*time.Hour + time.Second).Microseconds())
		uncertain, err := l.List(ctx, effects.Filter{State: effects.Uncertain})
		require.NoError(t, err)
		require.Len(t, uncertain, 1, "a dead caller's pending call is listed as uncertain")
		ref, err := l.DoFor(ctx, msg, "crm.create_task", c.create())
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		req, applied, _ := c.Counts()
		require.Equal(t, 1, req, "reconciled, not called again")
		require.Equal(t, 1, applied)
	})
}

// Members racing on one message: the remote side gets one key, and
// creates one task, whatever the interleaving.
func TestRacingAttemptsCreateOneTask(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		l, err := effects.New(st, effects.Config{Reconcile: c.reconcile})
		require.NoError(t, err)
		var wg sync.WaitGroup
		refs := make([]string, 8)
		for i := range refs {
			wg.Go(func() {
				// A call in flight in a live caller answers InFlightError
				// until it reports back; anything else records it.
				for range 1_000_000 {
					ref, err := l.DoFor(context.Background(), msg, "crm.create_task", c.create())
					if err == nil {
						refs[i] = ref
						return
					}
					if inFlight := (*effects.InFlightError)(nil); !errors.As(err, &inFlight) && !strings.Contains(err.Error(), "kept changing") {
						t.Errorf("attempt %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, r := range refs {
			require.Equal(t, "task-1", r)
		}
		_, applied, _ := c.Counts()
		require.Equal(t, 1, applied)
	})
}

func TestKeyIsDeterministicAndDistinct(t *testing.T) {
	k := effects.Key("c", "s", "id", "email")
	require.Equal(t, k, effects.Key("c", "s", "id", "email"))
	seen := map[string]string{}
	for _, in := range [][4]string{{"c", "s", "id", "email"}, {"c", "s", "id", "crm"}, {"c", "sid", "", "email"},
		{"cs", "", "id", "email"}, {"c", "s", "ide", "mail"}} {
		key := effects.Key(in[0], in[1], in[2], in[3])
		require.NotContains(t, seen, key, "%v collides with %s", in, seen[key])
		seen[key] = fmt.Sprint(in)
	}
}

func TestDoNeedsAnIdentityOutsideTheTransaction(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	defer st.Close()
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	never := func(context.Context, string) (string, error) { t.Fatal("called"); return "", nil }
	_, err = l.Do(context.Background(), "crm.create_task", never)
	require.ErrorIs(t, err, effects.ErrNoIdentity)
	_, err = l.DoFor(context.Background(), msg, " ", never)
	require.ErrorContains(t, err, "action is empty")
	_, err = l.DoFor(context.Background(), msg, "a\nb", never)
	require.ErrorContains(t, err, "control character")
	_, err = l.DoFor(context.Background(), seqboxtype.Identity{Consumer: "c"}, "x", never)
	require.ErrorContains(t, err, "incomplete")
	_, err = l.List(context.Background(), effects.Filter{State: "weird"})
	require.ErrorContains(t, err, "not one of")

	// Inside a handler, the inbox transaction is open: refused.
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "crm-worker", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := l.Do(ctx, "crm.create_task", never)
			if !errors.Is(err, effects.ErrInTransaction) {
				return fmt.Errorf("want ErrInTransaction, got %v", err)
			}
			return nil
		}})
	require.NoError(t, err)
	results, err := c.Deliver(context.Background(), []byte(`{"specversion":"1.0","id":"1","source":"crm","type":"t"}`), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, results[0].Outcome, results[0].Reason)

	// A handler that returns the refusal is dead-lettered at once: the
	// call can never be made there, and retrying it only spent the
	// message's attempts before the same end.
	c, err = seqbox.NewConsumer(seqbox.Config{Name: "crm-worker-2", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := l.Do(ctx, "crm.create_task", never)
			return err
		}})
	require.NoError(t, err)
	results, err = c.Deliver(context.Background(), []byte(`{"specversion":"1.0","id":"2","source":"crm","type":"t"}`), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLettered, results[0].Outcome, results[0].Reason)
	require.Contains(t, results[0].Reason, "call it from Config.Decide")
}

// net/http retries a request carrying an Idempotency-Key by itself when a
// reused connection breaks; against a remote side that ignores the key
// that is a second effect. The ledger's HTTP call is sent once, and the
// broken call is uncertain.
func TestHTTPCallIsNeverRetriedBehindTheLedger(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		c.Dedupe = false
		l, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		ctx := context.Background()
		warm := seqboxtype.Identity{Consumer: msg.Consumer, Source: msg.Source, ID: "evt-481"}
		_, err = l.DoFor(ctx, warm, "crm.create_task", c.create()) // the connection is now reused
		require.NoError(t, err)
		c.Arm(remoteapi.DropAfterApply)
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)
		req, applied, _ := c.Counts()
		require.Equal(t, 2, req, "the dropped call was not sent again by net/http")
		require.Equal(t, 2, applied)
	})
}

// Each failed call is one log line naming the message, the action, the
// state it left and the error.
func TestFailedCallsAreLogged(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		var logs bytes.Buffer
		l, err := effects.New(st, effects.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		c.Arm(remoteapi.Refuse)
		_, err = l.DoFor(context.Background(), msg, "crm.create_task", c.create())
		require.Error(t, err)
		line := logs.String()
		require.Equal(t, 1, strings.Count(line, "\n"), "one line: %s", line)
		for _, want := range []string{`msg="seqbox: external call failed"`, "source=" + msg.Source, "id=" + msg.ID,
			"action=crm.create_task", "state=failed", "400"} {
			require.Contains(t, line, want)
		}
	})
}

// A nil call never leaves the process: it is refused before anything is
// recorded, not recorded uncertain (a panic inside the call, which may
// have reached the remote side, is).
func TestANilCallIsRefusedBeforeAnythingIsRecorded(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	require.NoError(t, err)
	defer st.Close()
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	_, err = l.DoFor(ctx, seqboxtype.Identity{Consumer: "c", Source: "s", ID: "1"}, "x", nil)
	require.ErrorContains(t, err, "call is nil")
	rows, err := l.List(ctx, effects.Filter{Consumer: "c"})
	require.NoError(t, err)
	require.Empty(t, rows)
}
