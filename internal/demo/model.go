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
// in slow. It remembers every answer it gave, by id, with the process
// that asked (the X-Worker-Pid header). A call whose caller hung up before
// the answer (a worker SIGKILLed mid-call) gave no answer: it is counted
// apart, as abandoned, since nobody could record it.
type fakeModel struct {
	*httptest.Server
	slow      map[string]time.Duration
	mu        sync.Mutex
	answers   map[string][]answer
	abandoned int
}

// answer is one plan the model gave, and the process it gave it to.
type answer struct {
	plan string
	pid  string
}

// workerPid is the header a worker names its process in.
const workerPid = "X-Worker-Pid"

func startModel(slow map[string]time.Duration) *fakeModel {
	m := &fakeModel{slow: slow, answers: map[string][]answer{}}
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
	m.answers[in.ID] = append(m.answers[in.ID], answer{plan: plan, pid: r.Header.Get(workerPid)})
	m.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"plan": plan})
}

// modelStats is what the model saw: the calls it answered, those whose
// caller hung up first or died before it could record the answer, and per
// id the first answer and how many answers.
type modelStats struct {
	calls, abandoned int
	first            map[string]string
	asked            map[string]int
}

// stats returns what the model saw so far. An answer given to a process
// in killed that is not the plan applied for its id (applied) was lost
// with that process (a SIGKILL between the answer and its record): it is
// counted as abandoned, not as an answer.
func (m *fakeModel) stats(killed map[string]bool, applied map[string]string) modelStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := modelStats{abandoned: m.abandoned, first: map[string]string{}, asked: map[string]int{}}
	for id, as := range m.answers {
		for _, a := range as {
			if killed[a.pid] && a.plan != applied[id] {
				s.abandoned++
				continue
			}
			if s.asked[id] == 0 {
				s.first[id] = a.plan
			}
			s.asked[id]++
			s.calls++
		}
	}
	return s
}
