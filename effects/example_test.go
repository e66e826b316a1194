package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
)

// A worker creates a CRM task through an external API. The call runs in
// Decide, outside the inbox transaction, through the ledger; the handler
// stores the task's reference in the same transaction as the inbox
// identity. The message is delivered twice and the remote side sees one
// request.
func Example() {
	ctx := context.Background()
	// The CRM, on loopback: it creates a task per request and remembers
	// the Idempotency-Key each came with.
	var mu sync.Mutex
	requests, created := 0, map[string]string{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		key := r.Header.Get("Idempotency-Key")
		if _, ok := created[key]; !ok {
			created[key] = fmt.Sprintf("task-%d", len(created)+1)
		}
		fmt.Fprintf(w, `{"id":%q}`, created[key])
	}))
	defer api.Close()
	dir, _ := os.MkdirTemp("", "seqbox-effects-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "seqbox.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	st.DB().Exec(`CREATE TABLE followups (opportunity TEXT, crm_task TEXT)`)

	ledger, _ := effects.New(st, effects.Config{})
	createTask := effects.HTTP(nil, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/tasks", strings.NewReader(`{"title":"follow up"}`))
	}, func(resp *http.Response) (string, error) {
		var task struct{ ID string }
		err := json.NewDecoder(resp.Body).Decode(&task)
		return task.ID, err
	})
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-worker", Store: st,
		Decide: func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			ref, err := ledger.Do(ctx, "crm.create_task", createTask)
			return []byte(ref), err
		},
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			ref, _ := seqbox.DecisionFrom(ctx)
			_, err := tx.ExecContext(ctx, `INSERT INTO followups VALUES ($1, $2)`, ev.PartitionKey, string(ref))
			return err
		},
	})
	if err != nil {
		panic(err)
	}
	msg := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"followup.requested","partitionkey":"opp-2481"}`)
	for attempt := 1; attempt <= 2; attempt++ {
		results, _ := consumer.Deliver(ctx, msg, attempt)
		fmt.Println("delivery", attempt, results[0].Outcome)
	}
	var task string
	st.DB().QueryRow(`SELECT crm_task FROM followups`).Scan(&task)
	mu.Lock()
	fmt.Println("task:", task, "requests:", requests, "created:", len(created))
	mu.Unlock()
	// Output:
	// delivery 1 applied
	// delivery 2 duplicate
	// task: task-1 requests: 1 created: 1
}
