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
// in slow. It remembers every answer it gave, by id. A call whose caller
// hung up before the answer (a worker SIGKILLed mid-call) gave no answer:
// it is counted apart, as abandoned, since nobody could record it.
type fakeModel struct {
	*httptest.Server
	slow      map[string]time.Duration
	mu        sync.Mutex
	answers   map[string][]string
	calls     int
	abandoned int
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
	select {
	case <-time.After(m.slow[in.ID]):
	case <-r.Context().Done():
		m.mu.Lock()
		m.abandoned++
		m.mu.Unlock()
		return
	}
	m.mu.Lock()
	m.calls++
	m.answers[in.ID] = append(m.answers[in.ID], plan)
	m.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"plan": plan})
}

// modelStats is what the model saw: the calls it answered, those whose
// caller hung up first, and per id the first answer and how many answers.
type modelStats struct {
	calls, abandoned int
	first            map[string]string
	asked            map[string]int
}

// stats returns what the model saw so far.
func (m *fakeModel) stats() modelStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := modelStats{calls: m.calls, abandoned: m.abandoned, first: map[string]string{}, asked: map[string]int{}}
	for id, as := range m.answers {
		s.first[id], s.asked[id] = as[0], len(as)
	}
	return s
}
