// Command crm-task is seed 000's worker: for each "meeting held" event it
// creates a follow-up task in a CRM through its HTTP API. The CRM has no
// idempotency of its own (every POST creates a task), and the first call's
// answer is lost on the way back. The effects ledger makes the call safe
// to attempt again: the call is recorded as pending before it goes out,
// turns uncertain when the answer is lost, and the retry reconciles it by
// looking the task up by idempotency key instead of creating a second
// one. A producer retry of the same event is a duplicate in the inbox.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
)

func main() {
	ctx := context.Background()
	crm := newCRM()
	defer crm.Close()

	st, err := sqlite.Open(ctx, "worker.db")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS followups (
		opportunity TEXT PRIMARY KEY, crm_task TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	queue, err := embedded.Open(ctx, "worker.db", embedded.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Close()

	ledger, err := effects.New(st, effects.Config{
		Timeout: 2 * time.Second,
		// An uncertain call is looked up at the CRM before anything else.
		Reconcile: func(ctx context.Context, e effects.Effect) (effects.Reconciliation, error) {
			id, found := crm.lookup(e.IdempotencyKey)
			return effects.Reconciliation{Applied: found, Ref: id}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	createTask := func(ev seqboxtype.Event) effects.Call {
		return effects.HTTP(nil, func(ctx context.Context) (*http.Request, error) {
			body := fmt.Sprintf(`{"opportunity":%q,"title":"follow up on the meeting"}`, ev.PartitionKey)
			return http.NewRequestWithContext(ctx, http.MethodPost, crm.URL+"/tasks", strings.NewReader(body))
		}, func(resp *http.Response) (string, error) {
			var task struct{ ID string }
			err := json.NewDecoder(resp.Body).Decode(&task)
			return task.ID, err
		})
	}
	worker, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-task-worker", Store: st, Transport: queue, Workers: 1,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 5, InitialBackoff: 50 * time.Millisecond}},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The external call runs outside the inbox transaction, through
		// the ledger; its result (the task id) is the recorded decision.
		Decide: func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			id, err := ledger.Do(ctx, "crm.create_task", createTask(ev))
			return []byte(id), err
		},
		// The local effect commits with the inbox identity.
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			id, _ := seqbox.DecisionFrom(ctx)
			_, err := tx.ExecContext(ctx, `INSERT INTO followups (opportunity, crm_task) VALUES ($1, $2)`, ev.PartitionKey, string(id))
			return err
		},
		Observer: func(res seqboxtype.Result) {
			fmt.Printf("%s attempt %d: %s\n", res.ID, res.Attempt, res.Outcome)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range []string{
		`{"specversion":"1.0","id":"evt-482","source":"crm","type":"meeting.held","partitionkey":"opp-2481"}`,
		`{"specversion":"1.0","id":"evt-483","source":"crm","type":"meeting.held","partitionkey":"opp-2482"}`,
	} {
		if err := queue.Publish(ctx, []byte(e)); err != nil {
			log.Fatal(err)
		}
	}
	if err := worker.RunUntilIdle(ctx, time.Second); err != nil {
		log.Fatal(err)
	}
	// The producer timed out earlier and publishes evt-482 again.
	if err := queue.Publish(ctx, []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"meeting.held","partitionkey":"opp-2481"}`)); err != nil {
		log.Fatal(err)
	}
	if err := worker.RunUntilIdle(ctx, time.Second); err != nil {
		log.Fatal(err)
	}
	calls, _ := ledger.List(ctx, effects.Filter{Consumer: "crm-task-worker"})
	slices.SortFunc(calls, func(a, b effects.Effect) int { return strings.Compare(a.ID, b.ID) })
	for _, c := range calls {
		fmt.Printf("ledger: %s for %s %s, task %s, uncertain once: %v\n", c.Action, c.ID, c.State, c.Ref, c.UncertainAt != nil)
	}
	fmt.Printf("tasks in the CRM: %d, after %d requests\n", crm.tasks(), crm.requests())
}

// crm is a CRM API on loopback that creates a task at every POST and
// loses the answer to the first one for opp-2481.
type crm struct {
	*httptest.Server
	mu     sync.Mutex
	byKey  map[string]string
	perOpp map[string]int
	posts  int
}

func newCRM() *crm {
	c := &crm{byKey: map[string]string{}, perOpp: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

func (c *crm) serve(w http.ResponseWriter, r *http.Request) {
	var task struct{ Opportunity string }
	_ = json.NewDecoder(r.Body).Decode(&task)
	c.mu.Lock()
	c.posts++
	c.perOpp[task.Opportunity]++
	id := fmt.Sprintf("task-%s-%d", task.Opportunity, c.perOpp[task.Opportunity])
	c.byKey[r.Header.Get("Idempotency-Key")] = id // kept on the task, as an external reference
	lost := id == "task-opp-2481-1"
	c.mu.Unlock()
	if lost {
		// Created, but the answer never reaches the worker.
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

func (c *crm) lookup(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.byKey[key]
	return id, ok
}

func (c *crm) tasks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

func (c *crm) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.posts
}
