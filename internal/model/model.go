package model

// Model is the protocol within one set of bounds, possibly with a mutant
// switched on.
type Model struct {
	b       Bounds
	msgs    []message
	copies  []copyOf
	ids     int // identities (a collision shares one)
	workers int
	keys    int
	mutant  Mutant
	reached [nGuards]int
}

// New builds the model of the protocol within b, with mutant switched on
// ("" for none).
func New(b Bounds, mutant Mutant) (*Model, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if _, err := ParseMutant(string(mutant)); err != nil {
		return nil, err
	}
	m := &Model{b: b, msgs: b.messages(), workers: b.Workers, keys: b.Keys, mutant: mutant}
	m.copies = b.copies(m.msgs)
	for _, msg := range m.msgs {
		m.ids = max(m.ids, msg.id+1)
	}
	return m, nil
}

func (m *Model) mut(x Mutant) bool { return m.mutant == x }

// Initial is the state before anything ran: every copy is in the broker
// (the order producers publish in is the order workers receive in, and
// that is free).
func (m *Model) Initial() State {
	var s State
	for c := range s.Copy {
		s.Copy[c] = acked
	}
	for c := range m.copies {
		s.Copy[c] = queued
	}
	for i := range s.ID {
		s.ID[i].Hash, s.ID[i].Owner, s.ID[i].Credit = -1, -1, 1
		s.ID[i].TurnMsg, s.ID[i].DecFor, s.ID[i].Sent = -1, -1, -1
	}
	s.Crashes, s.Expiries, s.Losses = uint8(m.b.Crashes), uint8(m.b.Expiries), uint8(m.b.Losses)
	s.Failures, s.Ops = uint8(m.b.Failures), uint8(m.b.Ops)
	return s
}

// stepKind names a step.
type stepKind uint8

const (
	stReceive stepKind = iota
	stPickup
	stAckEarly
	stRun
	stHandlerFail
	stReserve
	stClaim
	stLedger
	stAnswer
	stDrop
	stTimeout
	stRecord
	stFinish
	stCrash
	stLeaseExpire
	stClaimExpire
	stHeartbeatLoss
	stLedgerLease
	stLedgerLeaseLoss
	stLedgerAge
	stHoldExpire
	stRedrive
	stSkip
	stRelease
	stLose
	stEndTurn
	stReleaseTurn
	stSweepUnpark
	stDeadline
	stResolve
)

// step is one transition: who took it and on what.
type step struct {
	kind stepKind
	w    int8 // worker
	x    int8 // copy, identity or key, by kind
	a    answer
}

// successors calls emit for every step enabled in s and the state it
// leads to.
func (m *Model) successors(s *State, emit func(step, *State)) {
	for w := range m.workers {
		m.workerSteps(s, w, emit)
	}
	m.brokerSteps(s, emit)
	m.remoteSteps(s, emit)
	m.clockSteps(s, emit)
	m.operatorSteps(s, emit)
}

// try copies s, applies f to the copy and emits it.
func try(s *State, st step, emit func(step, *State), f func(t *State)) {
	t := *s
	f(&t)
	emit(st, &t)
}
