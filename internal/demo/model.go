package demo

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// fakeModel is a deliberately random model on loopback: POST /decide with
// {"id": …} answers a fresh random plan at every call, slowly for the ids
// in slow. It remembers every answer it gave, by id.
type fakeModel struct {
	*httptest.Server
	slow    map[string]time.Duration
	mu      sync.Mutex
	answers map[string][]string
	calls   int
}

func startModel(slow map[string]time.Duration) *fakeModel {
	m := &fakeModel{slow: slow, answers: map[string][]string{}}
	m.Server = httptest.NewServer(http.HandlerFunc(m.decide))
	return m
}

func (m *fakeModel) decide(w http.ResponseWriter, r *http.Request) {
	var in struct{ ID string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ID == "" {
		http.Error(w, "want {\"id\": …}", http.StatusBadRequest)
		return
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	plan := "plan-" + hex.EncodeToString(b[:])
	m.mu.Lock()
	m.calls++
	m.answers[in.ID] = append(m.answers[in.ID], plan)
	m.mu.Unlock()
	select {
	case <-time.After(m.slow[in.ID]):
	case <-r.Context().Done():
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"plan": plan})
}

// stats returns the calls made, and the first answer given for each id.
func (m *fakeModel) stats() (calls int, first map[string]string, asked map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first, asked = map[string]string{}, map[string]int{}
	for id, as := range m.answers {
		first[id], asked[id] = as[0], len(as)
	}
	return m.calls, first, asked
}
