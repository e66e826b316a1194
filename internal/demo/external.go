package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/remoteapi"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

// ExternalResult is the external-call lab's line.
type ExternalResult struct {
	LogicalActions, RemoteEffects, Uncertain, Reconciled, DuplicatesAtRemote int
}

// Line renders the counters.
func (r ExternalResult) Line() string {
	return fmt.Sprintf("logical_actions=%d remote_effects=%d uncertain=%d reconciled=%d duplicates_at_remote=%d",
		r.LogicalActions, r.RemoteEffects, r.Uncertain, r.Reconciled, r.DuplicatesAtRemote)
}

const (
	externalConsumer = "crm-worker"
	externalAction   = "crm.create_task"
	externalLease    = 1500 * time.Millisecond
	externalTimeout  = time.Second
)

// externalFaults is what the remote API does to successive calls: every
// other call misbehaves, each in its own way.
var externalFaults = []remoteapi.Fault{
	remoteapi.None, remoteapi.DropAfterApply,
	remoteapi.None, remoteapi.HangAfterApply,
	remoteapi.None, remoteapi.ResetBeforeApply,
	remoteapi.None, remoteapi.KillAfterApply,
	remoteapi.None, remoteapi.Refuse,
}

// RunExternal runs the external-call lab: a CRM API on loopback that
// creates a task at every request (it has no idempotency of its own), a
// worker process that creates one task per message through the effects
// ledger, and an API that drops responses, hangs past the client's
// timeout, resets connections, refuses, and has the worker killed in the
// middle of a call. self is the seqbox binary; db a fresh database.
func RunExternal(ctx context.Context, self, db string, actions int, w io.Writer) (ExternalResult, error) {
	res := ExternalResult{LogicalActions: actions}
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		return res, err
	}
	defer st.Close()
	if err := fresh(ctx, st, externalConsumer, db); err != nil {
		return res, err
	}
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS crm_followups (message TEXT PRIMARY KEY, crm_task TEXT NOT NULL)`); err != nil {
		return res, err
	}
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: externalLease})
	if err != nil {
		return res, err
	}
	defer q.Close()
	var bodies [][]byte
	for i := 1; i <= actions; i++ {
		bodies = append(bodies, fmt.Appendf(nil, `{"specversion":"1.0","id":"act-%02d","source":"crm/opportunities","type":"followup.requested","partitionkey":"opp-%d","objectversion":1,"data":{"title":"call back %d"}}`, i, 2480+i, i))
	}
	if err := q.PublishBatch(ctx, bodies); err != nil {
		return res, err
	}
	api := remoteapi.Start()
	defer api.Close()
	api.Dedupe = false
	api.Hang = 3 * externalTimeout
	api.Arm(externalFaults...)
	var mu sync.Mutex
	var current *worker
	api.OnKill = func() {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, "  the CRM applied a call; its worker is killed (SIGKILL) before the answer")
		current.kill()
		<-current.done
	}
	fmt.Fprintf(w, "published %d follow-ups; the CRM API at %s creates a task at every request and misbehaves on every other call\n", actions, api.URL)
	for run := 1; ; run++ {
		if run > 12 {
			return res, errors.New("the follow-ups were not all applied after 12 worker runs")
		}
		mu.Lock()
		current, err = startWorker(self, w, nil, "--scenario", "external-call", "--db", db, "--api", api.URL)
		p := current
		mu.Unlock()
		if err != nil {
			return res, err
		}
		fmt.Fprintf(w, "worker %d started\n", run)
		killed, err := p.wait()
		if err != nil {
			return res, fmt.Errorf("worker %d: %w", run, err)
		}
		if killed {
			continue
		}
		var done int
		if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM crm_followups`).Scan(&done); err != nil {
			return res, err
		}
		if done == actions {
			break
		}
	}
	_, res.RemoteEffects, _ = api.Counts()
	res.DuplicatesAtRemote = api.Duplicates()
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(uncertain_at), COUNT(reconciled_at) FROM seqbox_effects
		WHERE consumer = $1`, externalConsumer).Scan(&res.Uncertain, &res.Reconciled); err != nil {
		return res, err
	}
	fmt.Fprintln(w, res.Line())
	return res, nil
}

// RunExternalWorker is one worker process of the external-call lab: it
// consumes until the queue has been idle for a while, then exits.
func RunExternalWorker(ctx context.Context, db, api string, w io.Writer) error {
	st, err := dbopen.StoreAccess(ctx, db, store.Adopt)
	if err != nil {
		return err
	}
	defer st.Close()
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: externalLease})
	if err != nil {
		return err
	}
	defer q.Close()
	client := &http.Client{}
	// The lab counts the failed calls and prints them; the ledger's own
	// line per failure would repeat them on stderr.
	ledger, err := effects.New(st, effects.Config{Timeout: externalTimeout, Logger: slog.New(slog.DiscardHandler),
		Reconcile: effects.ReconcileHTTP(client, func(ctx context.Context, e effects.Effect) (*http.Request, error) {
			// The CRM's task created under an idempotency key.
			return http.NewRequestWithContext(ctx, http.MethodGet, api+"/tasks?key="+e.IdempotencyKey, nil)
		}, taskID)})
	if err != nil {
		return err
	}
	create := func(ev seqboxtype.Event) effects.Call {
		return effects.HTTP(client, func(ctx context.Context) (*http.Request, error) {
			body := fmt.Sprintf(`{"for":%q,"title":"follow up %s"}`, ev.ID, ev.PartitionKey)
			return http.NewRequestWithContext(ctx, http.MethodPost, api+"/tasks", strings.NewReader(body))
		}, taskID)
	}
	c, err := seqbox.NewConsumer(seqbox.Config{
		Name: externalConsumer, Store: st, Transport: q, Workers: 1, BatchSize: 1,
		ExtendEvery: externalLease / 3, ExtendBy: externalLease,
		// A worker killed mid-call leaves its claim on the decision; the
		// next one waits this long for it, so keep it near the call's
		// own timeout.
		DecideTimeout: 2 * externalTimeout,
		Policies:      seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}},
		Decide: func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			ref, err := ledger.Do(ctx, externalAction, create(ev))
			return []byte(ref), err
		},
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			ref, _ := seqbox.DecisionFrom(ctx)
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_followups (message, crm_task) VALUES ($1, $2)`, ev.ID, string(ref))
			return err
		},
		Observer: func(res seqboxtype.Result) {
			line := fmt.Sprintf("  %s attempt %d: %s", res.ID, res.Attempt, res.Outcome)
			if res.Reason != "" {
				line += " (" + res.Reason + ")"
			}
			fmt.Fprintln(w, line)
		},
	})
	if err != nil {
		return err
	}
	return c.RunUntilIdle(ctx, 2*time.Second)
}

// taskID reads the task id of a created task.
func taskID(resp *http.Response) (string, error) {
	var task struct{ ID string }
	err := json.NewDecoder(resp.Body).Decode(&task)
	return task.ID, err
}
