package demo

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

// AgentResult is the agent-decision lab's line.
type AgentResult struct {
	Messages, Redeliveries, ModelCalls, DecisionsChanged, BusinessEffects int
	// ModelCallsAbandoned are calls whose worker was killed before the
	// model answered: no answer existed to record, so the next worker
	// asks again. They are not in ModelCalls.
	ModelCallsAbandoned int
}

// Line renders the counters.
func (r AgentResult) Line() string {
	return fmt.Sprintf("messages=%d redeliveries=%d model_calls=%d model_calls_abandoned=%d decisions_changed_on_redelivery=%d business_effects=%d",
		r.Messages, r.Redeliveries, r.ModelCalls, r.ModelCallsAbandoned, r.DecisionsChanged, r.BusinessEffects)
}

const (
	agentConsumer = "followup-agent"
	agentLease    = time.Second
	agentMessages = 12
	// agentRejected is the message the CRM rejects once: it is
	// dead-lettered after its decision, fixed, and redriven.
	agentRejected = "lead-07"
	// agentCrash is the message whose handler kills its worker, between
	// Decide and COMMIT, in workers armed through agentCrashEnv.
	agentCrash    = "lead-05"
	agentCrashEnv = "SEQBOX_DEMO_CRASH_IN"
)

// agentSlow are the decisions that outlast the lease: the worker does not
// extend leases, so the other worker receives them mid-decision.
var agentSlow = map[string]time.Duration{"lead-03": 3 * agentLease, "lead-10": 3 * agentLease}

// RunAgent runs the agent-decision lab: a deliberately random model on
// loopback, two worker processes that decide (ask the model) outside the
// transaction and apply the decision inside it, a worker killed (SIGKILL)
// between Decide and COMMIT, decisions that outlast the lease (the other
// worker receives them mid-decision), and a dead-lettered message
// redriven. Every message must be decided once (a model answer is never
// thrown away; only a call whose worker died before the answer came is
// asked again, and is counted apart), and applied once with that decision.
func RunAgent(ctx context.Context, self, db string, w io.Writer) (AgentResult, error) {
	res := AgentResult{Messages: agentMessages}
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		return res, err
	}
	defer st.Close()
	if err := fresh(ctx, st, agentConsumer, db); err != nil {
		return res, err
	}
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS agent_actions (message TEXT PRIMARY KEY, plan TEXT NOT NULL)`); err != nil {
		return res, err
	}
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: agentLease})
	if err != nil {
		return res, err
	}
	defer q.Close()
	var bodies [][]byte
	for i := 1; i <= agentMessages; i++ {
		bodies = append(bodies, fmt.Appendf(nil, `{"specversion":"1.0","id":"lead-%02d","source":"crm/leads","type":"lead.qualified","partitionkey":"lead-%02d","objectversion":1}`, i, i))
	}
	if err := q.PublishBatch(ctx, bodies); err != nil {
		return res, err
	}
	model := startModel(agentSlow)
	defer model.Close()
	fmt.Fprintf(w, "published %d leads; the model at %s answers at random, slower than the lease for %d of them\n",
		agentMessages, model.URL, len(agentSlow))

	var mu sync.Mutex
	seenPlans := map[string]map[string]bool{}
	killedPids := map[string]bool{}
	counts := func(out io.Reader) {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			var attempt int
			var id, plan string
			if _, err := fmt.Sscanf(line, "  handler %s sees %s", &id, &plan); err == nil {
				mu.Lock()
				if seenPlans[id] == nil {
					seenPlans[id] = map[string]bool{}
				}
				seenPlans[id][plan] = true
				mu.Unlock()
				continue // bookkeeping, not narration
			}
			fmt.Fprintln(w, line)
			if _, err := fmt.Sscanf(line, "  delivery attempt %d", &attempt); err == nil && attempt > 1 {
				mu.Lock()
				res.Redeliveries++
				mu.Unlock()
			}
		}
	}
	// run runs one worker process to its end; it reports whether the
	// process was killed.
	run := func(env ...string) (bool, error) {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() { counts(pr); close(done) }()
		defer func() { pw.Close(); <-done }()
		p, err := startWorker(self, pw, env, "--scenario", "agent-decision", "--db", db, "--api", model.URL)
		if err != nil {
			return false, err
		}
		killed, err := p.wait()
		if killed {
			mu.Lock()
			killedPids[strconv.Itoa(p.cmd.Process.Pid)] = true
			mu.Unlock()
		}
		return killed, err
	}
	// Two workers at once, both armed to die in the handler of the
	// crash message, between Decide and COMMIT; killed workers are
	// replaced (unarmed) until the queue is drained.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Go(func() {
			env := []string{agentCrashEnv + "=" + agentCrash}
			for range 5 {
				killed, err := run(env...)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", i+1, err)
					return
				}
				if !killed {
					return
				}
				fmt.Fprintf(w, "worker %d died between Decide and COMMIT of %s (SIGKILL); a new one starts\n", i+1, agentCrash)
				env = nil
			}
			errs <- fmt.Errorf("worker %d: killed five times", i+1)
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	// The CRM is fixed: redrive what it rejected, through a worker (the
	// consumer that owns the handler).
	if killed, err := run("SEQBOX_DEMO_REDRIVE=1"); err != nil || killed {
		return res, fmt.Errorf("redrive worker: killed=%v %v", killed, err)
	}

	applied, err := appliedPlans(ctx, st.DB())
	if err != nil {
		return res, err
	}
	ms := model.stats(killedPids, applied)
	res.ModelCalls, res.ModelCallsAbandoned = ms.calls, ms.abandoned
	for id, plan := range applied {
		res.BusinessEffects++
		// Changed: the applied plan is not the model's first answer, or
		// handler calls (committed or not) saw more than one plan.
		if plan != ms.first[id] || ms.asked[id] > 1 || len(seenPlans[id]) > 1 {
			res.DecisionsChanged++
		}
	}
	fmt.Fprintln(w, res.Line())
	return res, nil
}

// RunAgentWorker is one worker process of the agent-decision lab. With
// SEQBOX_DEMO_REDRIVE set it redrives the DLQ instead of consuming.
func RunAgentWorker(ctx context.Context, db, modelURL string, redrive bool, w io.Writer) error {
	st, err := dbopen.StoreAccess(ctx, db, store.Adopt)
	if err != nil {
		return err
	}
	defer st.Close()
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: agentLease})
	if err != nil {
		return err
	}
	defer q.Close()
	var mu sync.Mutex
	cfg := seqbox.Config{
		Name: agentConsumer, Store: st, Transport: q, Workers: 1, BatchSize: 4,
		// No lease extension: a slow decision outlasts its lease, and the
		// message goes to the other worker mid-decision.
		ExtendEvery: time.Hour, DecideTimeout: 4 * agentLease,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Decide: func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			return askModel(ctx, modelURL, ev.ID)
		},
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			plan, _ := seqbox.DecisionFrom(ctx)
			mu.Lock()
			fmt.Fprintf(w, "  handler %s sees %s\n", ev.ID, plan)
			mu.Unlock()
			if ev.ID == os.Getenv(agentCrashEnv) {
				// Decided, recorded, applying: die before COMMIT.
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			if ev.ID == agentRejected && !redrive {
				return seqbox.Permanent(errors.New("CRM rejected the follow-up (fixed later; redrive it)"))
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO agent_actions (message, plan) VALUES ($1, $2)`, ev.ID, string(plan))
			return err
		},
		Observer: func(res seqboxtype.Result) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "  delivery attempt %d of %s: %s\n", res.Attempt, res.ID, res.Outcome)
		},
	}
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		return err
	}
	if !redrive {
		return c.RunUntilIdle(ctx, 3*time.Second)
	}
	letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: agentConsumer, All: false})
	if err != nil {
		return err
	}
	for _, letter := range letters {
		fmt.Fprintf(w, "redrive %s from the DLQ\n", letter.ID)
		if _, err := c.Redrive(ctx, letter.Seq); err != nil {
			return err
		}
	}
	return nil
}

// appliedPlans reads the plan each message was applied with.
func appliedPlans(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT message, plan FROM agent_actions`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, plan string
		if err := rows.Scan(&id, &plan); err != nil {
			return nil, err
		}
		out[id] = plan
	}
	return out, rows.Err()
}

// askModel asks the fake model for a plan.
func askModel(ctx context.Context, url, id string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"id":%q}`, id)))
	if err != nil {
		return nil, err
	}
	req.Header.Set(workerPid, strconv.Itoa(os.Getpid()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct{ Plan string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Plan == "" {
		return nil, fmt.Errorf("model answered %s: %v", resp.Status, err)
	}
	return []byte(out.Plan), nil
}
