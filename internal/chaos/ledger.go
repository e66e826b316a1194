package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ledgerScenario drives Config.Decide and effects.Ledger against a remote
// that fails, hangs and loses answers, with the consumers SIGKILLed at
// random (docs/design.md §10, the agent path in the library).
const ledgerScenario = "agent-ledger"

// remoteAction is the ledger action of the scenario's remote call.
const remoteAction = "remote.create"

// faultyRemote is a remote API with no idempotency of its own: every POST
// creates an effect. It is the witness of the ledger's promises: one
// effect per logical action (idempotency key), and no call re-executed
// while a call before it may have applied, unless a reconciliation (GET)
// asked in between.
type faultyRemote struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	r   *rand.Rand
	// effects counts the effects per idempotency key; unsure marks keys
	// whose last call may have applied without the caller knowing.
	effects   map[string]int
	unsure    map[string]bool
	blind     []string
	posts     int
	reconcile int
	// log is the remote's history: the first effect of each
	// idempotency key, in the order the remote made them.
	log []Apply
}

func startFaultyRemote(seed uint64) (*faultyRemote, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &faultyRemote{url: "http://" + ln.Addr().String(), r: rand.New(rand.NewPCG(seed, 11)),
		effects: map[string]int{}, unsure: map[string]bool{}}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *faultyRemote) Close() error { return f.srv.Close() }

func (f *faultyRemote) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		key := strings.TrimPrefix(r.URL.Path, "/effects/")
		f.mu.Lock()
		f.reconcile++
		n := f.effects[key]
		delete(f.unsure, key)
		f.mu.Unlock()
		if n == 0 {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = fmt.Fprintf(w, `{"ref":"effect-%s"}`, key)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var ev agentEvent
	_ = json.Unmarshal(body, &ev)
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.posts++
	if f.unsure[key] {
		f.blind = append(f.blind, key)
	}
	roll := f.r.IntN(100)
	f.mu.Unlock()
	apply := func() {
		f.mu.Lock()
		if f.effects[key]++; f.effects[key] == 1 {
			f.log = append(f.log, ev.apply())
		}
		f.mu.Unlock()
	}
	unsure := func() {
		f.mu.Lock()
		f.unsure[key] = true
		f.mu.Unlock()
	}
	switch {
	case roll < 10: // a 5xx: applied or not, the caller cannot tell
		unsure()
		if roll < 5 {
			apply()
		}
		w.WriteHeader(http.StatusBadGateway)
	case roll < 15: // hangs past the caller's timeout, and applies before or after it
		unsure()
		if roll%2 == 0 {
			apply()
		}
		time.Sleep(1500 * time.Millisecond)
		if roll%2 == 1 {
			apply()
		}
		w.WriteHeader(http.StatusCreated)
	case roll < 20: // applies, and the answer is lost
		unsure()
		apply()
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
	default:
		apply()
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"ref":"effect-%s"}`, key)
	}
}

// check verifies the remote's side: for every identity the consumer
// applied, exactly one effect; nowhere more than one; no call made blind.
func (f *faultyRemote) check(ctx context.Context, st store.Store, res *Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, n := range f.effects {
		if n > 1 {
			res.DuplicateEffects += n - 1
			res.fail("remote: %d effects for one logical action (%s)", n, key)
		}
	}
	for _, key := range f.blind {
		res.fail("remote: %s called again while its previous call was uncertain, without a reconciliation", key)
	}
	rows, err := st.DB().QueryContext(ctx, `SELECT source, id FROM seqbox_inbox WHERE consumer = $1 AND outcome = 'applied'`, Consumer)
	if err != nil {
		res.fail("remote: read the inbox: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var source, id string
		if err := rows.Scan(&source, &id); err != nil {
			res.fail("remote: %v", err)
			return
		}
		if n := f.effects[effects.Key(Consumer, source, id, remoteAction)]; n != 1 {
			res.fail("remote: %s/%s was applied with %d remote effects", source, id, n)
		}
	}
}

// history is the remote's history of effects (see faultyRemote.log).
func (f *faultyRemote) history() []Apply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Apply(nil), f.log...)
}

// withRemote gives cfg a Decide that creates the message's effect at the
// remote through the ledger, reconciling uncertain calls by key.
func withRemote(cfg *seqbox.Config, st store.Store, remote string) error {
	client := &http.Client{}
	// Errors only, as the worker's consumer logs: the faults are the point.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ledger, err := effects.New(st, effects.Config{Timeout: time.Second, Logger: quiet, Reconcile: effects.ReconcileHTTP(client,
		func(ctx context.Context, e effects.Effect) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, remote+"/effects/"+e.IdempotencyKey, nil)
		}, refOf)})
	if err != nil {
		return err
	}
	call := func(ev seqboxtype.Event) effects.Call {
		// The remote keeps its history of effects from what it is sent.
		body, _ := json.Marshal(agentEvent{Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey,
			ObjectVersion: ev.ObjectVersion, BusinessKey: ev.BusinessKey})
		return effects.HTTP(client, func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, remote+"/effects", bytes.NewReader(body))
		}, func(*http.Response) (string, error) { return "created", nil })
	}
	cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		ref, err := ledger.Do(ctx, remoteAction, call(ev))
		return []byte(ref), err
	}
	return nil
}

// refOf reads the remote's answer to a lookup: {"ref": …}.
func refOf(resp *http.Response) (string, error) {
	var body struct{ Ref string }
	err := json.NewDecoder(resp.Body).Decode(&body)
	return body.Ref, err
}
