package chaos

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// sdkRemote is the remote side of an SDK's example agent under chaos
// (sdk/python/examples/refund_agent.py's REMOTE): the model (POST /model)
// and two tools (POST /refund, POST /email with Idempotency-Key; GET
// /refund?key=K and /email?key=K to find a call by its key). It does not
// deduplicate: a tool call made twice is applied twice, and the oracle
// counts it. Each model call is noted with the agent incarnation that
// made it.
type sdkRemote struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	// incarnation is the agent process running now (counted from 1).
	incarnation int
	// model: (event id, step) → the incarnations that asked.
	model map[[2]string][]int
	// applied: (action, idempotency key) → times applied; refs its ref.
	applied map[[2]string]int
	refs    map[[2]string]string
	// byEvent: (event id, action) → the idempotency keys it came with.
	byEvent map[[2]string]map[string]bool
	// emails: partition key → event ids in the order their email was
	// applied (the last call of each event's handling).
	emails map[string][]string
	// killAfterTool, when set, runs after the next tool call is applied
	// and before it is answered (the agent dies right after a tool call).
	killAfterTool func()
}

// toolBody is what the example agent sends a tool.
type toolBody struct {
	Order  string `json:"order"`
	Event  string `json:"event"`
	Key    string `json:"key"`
	Amount int    `json:"amount"`
}

func startSDKRemote() (*sdkRemote, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &sdkRemote{url: "http://" + ln.Addr().String(), model: map[[2]string][]int{}, applied: map[[2]string]int{},
		refs: map[[2]string]string{}, byEvent: map[[2]string]map[string]bool{}, emails: map[string][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /model", r.modelCall)
	mux.HandleFunc("POST /{action}", r.toolCall)
	mux.HandleFunc("GET /{action}", r.lookup)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *sdkRemote) Close() { _ = r.srv.Close() }

func (r *sdkRemote) modelCall(w http.ResponseWriter, req *http.Request) {
	var b struct {
		ID, Step string
		Data     struct{ Amount int }
	}
	if err := json.NewDecoder(req.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	k := [2]string{b.ID, b.Step}
	r.model[k] = append(r.model[k], r.incarnation)
	r.mu.Unlock()
	writeJSONBody(w, map[string]any{"refund": b.Data.Amount, "to": "customer@example.com"})
}

func (r *sdkRemote) toolCall(w http.ResponseWriter, req *http.Request) {
	action, key := req.PathValue("action"), req.Header.Get("Idempotency-Key")
	var b toolBody
	if err := json.NewDecoder(req.Body).Decode(&b); err != nil || key == "" {
		http.Error(w, "a tool call needs a JSON body and an Idempotency-Key", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	k := [2]string{action, key}
	r.applied[k]++
	ref, ok := r.refs[k]
	if !ok {
		ref = fmt.Sprintf("%s-%d", action, len(r.refs)+1)
		r.refs[k] = ref
	}
	ek := [2]string{b.Event, action}
	if r.byEvent[ek] == nil {
		r.byEvent[ek] = map[string]bool{}
	}
	r.byEvent[ek][key] = true
	if action == "email" {
		r.emails[b.Key] = append(r.emails[b.Key], b.Event)
	}
	kill := r.killAfterTool
	r.killAfterTool = nil
	r.mu.Unlock()
	if kill != nil {
		kill()
	}
	writeJSONBody(w, map[string]string{"ref": ref})
}

func (r *sdkRemote) lookup(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	ref, ok := r.refs[[2]string{req.PathValue("action"), req.URL.Query().Get("key")}]
	r.mu.Unlock()
	if !ok {
		http.Error(w, "{}", http.StatusNotFound)
		return
	}
	writeJSONBody(w, map[string]string{"ref": ref})
}

func writeJSONBody(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
