package model

import "fmt"

// violation is a broken invariant: which, and the identities or key it
// names.
type violation struct {
	Code uint8
	A, B int8
}

// The invariants (issue 19; docs/design.md §18.2, "The invariants").
const (
	okay uint8 = iota
	vEffectTwice
	vBusinessKeyTwice
	vRemoteTwice
	vAppliedUnsent
	vOutOfOrder
	vSilentSkip
	vLostStale
	vTwoInTurn
	vAskedTwice
	vAskedOutOfTurn
	vBusinessKeyAsked
	vAckBeforeCommit
	vForeignBlock
	vSettledTwice
	vDeadlock
	vNeverSettles
	vTwoPayloads
	vDecisionElsewhere
	vAppliedNotReceived
	vExpiredUnderCall
	vExpiredWithEffect
	vReleasedRunsAgain
)

var violationText = map[uint8]string{
	vEffectTwice:        "at most one effect per identity: %[1]s applied twice",
	vBusinessKeyTwice:   "at most one effect per business key: %[1]s's effect happened, and so did the one of %[2]s",
	vSettledTwice:       "one outcome per identity: %[1]s, already %[2]s, reached another",
	vRemoteTwice:        "at most one remote effect per logical action: the remote side applied %[1]s's call twice",
	vAppliedUnsent:      "applied only what the agent did: %[1]s applied, but the agent never received it",
	vOutOfOrder:         "per key, effects follow the version order: %[1]s applied after %[2]s",
	vSilentSkip:         "a version is skipped only through a recorded gap, skip or stale outcome: %[1]s applied over a missing version with no record",
	vLostStale:          "a crash never turns an event stale: %[1]s took its turn, then ended stale with no gap decision",
	vTwoInTurn:          "one event per key at a time: %[1]s passed its gate while %[2]s had not settled",
	vAskedTwice:         "the model is asked at most once per identity unless a call failed or was lost, and that was recorded: %[1]s asked again",
	vAskedOutOfTurn:     "order at the agent: the agent was asked about %[1]s while %[2]s had not settled",
	vBusinessKeyAsked:   "once at the agent: %[1]s reached the agent while the business key %[2]s was in flight or done there",
	vAckBeforeCommit:    "ACK only after COMMIT: a copy of %[1]s was acknowledged with nothing committed for it",
	vForeignBlock:       "a poison message blocks only its own key: key %[1]s is blocked by %[2]s",
	vDeadlock:           "nothing lost: no step is possible, yet %[1]s has no final outcome",
	vNeverSettles:       "liveness: from here no run settles %[1]s, whatever the scheduler and the operator do",
	vTwoPayloads:        "one identity, one payload at the agent: %[1]s was sent under the identity whose agent already received %[2]s",
	vDecisionElsewhere:  "bound to the payload: %[1]s applied with the decision made for %[2]s",
	vAppliedNotReceived: "the envelope applied is the one the agent received: %[1]s applied, the agent received %[2]s",
	vExpiredUnderCall:   "the outcome follows the effect: %[1]s's call took effect for a live decider that kept its claim, and %[1]s ended expired",
	vExpiredWithEffect:  "the outcome follows the effect: %[1]s ended expired, and the remote side applied its call",
	vReleasedRunsAgain:  "one outcome per identity: a keys release recorded %[1]s skipped, yet it is %[2]s: its message was kept to run again",
}

// describe words the violation with the scenario's names.
func (m *Model) describe(v violation) string {
	name := func(x int8, asKey bool) string {
		switch {
		case x < 0:
			return "-"
		case asKey:
			return fmt.Sprintf("k%d", x)
		}
		return m.msgs[x].name
	}
	key := v.Code == vForeignBlock
	var b string
	switch v.Code {
	case vBusinessKeyAsked, vBusinessKeyTwice:
		b = fmt.Sprintf("b%d (under %s)", m.msgs[v.A].bk, name(v.B, false))
	case vSettledTwice, vReleasedRunsAgain:
		b = statusText[v.B]
	default:
		b = name(v.B, false)
	}
	return fmt.Sprintf(violationText[v.Code], name(v.A, key), b)
}

func (s *State) fail(code uint8, a, b int) {
	if s.Violation.Code == okay {
		s.Violation = violation{Code: code, A: int8(a), B: int8(b)}
	}
}

// checkApply runs when msg's effect is applied; mi is msg's index (the
// copy's payload).
func (m *Model) checkApply(s *State, msg message, mi int) {
	i := msg.id
	id := &s.ID[i]
	if id.Effects > 1 {
		s.fail(vEffectTwice, i, -1)
	}
	if !m.b.Plain {
		if id.Remote == 0 {
			s.fail(vAppliedUnsent, i, -1)
		}
		if id.Decided && int(id.DecFor) != mi {
			s.fail(vDecisionElsewhere, mi, int(id.DecFor))
		}
		if id.Sent >= 0 && int(id.Sent) != mi {
			s.fail(vAppliedNotReceived, mi, int(id.Sent))
		}
	}
	if msg.bk >= 0 {
		for j := range m.ids {
			if j != i && m.msgs[j].bk == msg.bk && s.ID[j].Effects > 0 {
				s.fail(vBusinessKeyTwice, i, j)
			}
		}
	}
	if msg.key < 0 || msg.ver == 0 {
		return
	}
	key := &s.Key[msg.key]
	last := int(key.LastApplied)
	if last > 0 && msg.ver <= last {
		s.fail(vOutOfOrder, i, m.versionOf(msg.key, last))
	}
	for u := last + 1; last > 0 && u < msg.ver; u++ {
		if key.Gaps&(1<<u) == 0 {
			s.fail(vSilentSkip, i, -1)
		}
	}
}

// versionOf is the identity of key k's version v (-1 if none).
func (m *Model) versionOf(k, v int) int {
	for j := range m.ids {
		if m.msgs[j].key == k && m.msgs[j].ver == v {
			return j
		}
	}
	return -1
}

// checkStale runs when identity i settles stale.
func (m *Model) checkStale(s *State, i int) {
	if s.ID[i].Passed && !s.ID[i].Overtaken {
		s.fail(vLostStale, i, -1)
	}
}

// unfinishedOnKey returns another identity of key k that is in its turn
// (passed its gate, or asked) and has neither reached a final outcome nor been overtaken
// by a recorded gap; -1 when none.
func (s *State) unfinishedOnKey(m *Model, k, i int) int {
	for j := range m.ids {
		o := &s.ID[j]
		if j != i && m.msgs[j].key == k && (o.Passed || o.Asks > 0) && !o.Status.final() && !o.Overtaken {
			return j
		}
	}
	return -1
}

// checkOneAtATime runs when identity i passes its key's gate.
func (m *Model) checkOneAtATime(s *State, k, i int) {
	if j := s.unfinishedOnKey(m, k, i); j >= 0 {
		s.fail(vTwoInTurn, i, j)
	}
}

// checkAsk runs when the agent is asked about identity i.
func (m *Model) checkAsk(s *State, i, mi int) {
	id := &s.ID[i]
	if id.Credit == 0 {
		s.fail(vAskedTwice, i, -1)
	}
	if id.Sent >= 0 && int(id.Sent) != mi {
		s.fail(vTwoPayloads, mi, int(id.Sent))
	}
	msg := m.msgs[i]
	if msg.key >= 0 {
		if j := s.unfinishedOnKey(m, msg.key, i); j >= 0 {
			s.fail(vAskedOutOfTurn, i, j)
		}
	}
	if msg.bk < 0 {
		return
	}
	for j := range m.ids {
		o := &s.ID[j]
		if j != i && m.msgs[j].bk == msg.bk && (o.Remote > 0 || o.InFlight > 0 || o.Ledger.unresolved()) {
			s.fail(vBusinessKeyAsked, i, j)
		}
	}
}

// checkRemote runs when the remote side applies identity i's call.
func (m *Model) checkRemote(s *State, i int) {
	if s.ID[i].Remote > 1 {
		s.fail(vRemoteTwice, i, -1)
	}
	if s.ID[i].Status == expired && !m.b.Plain {
		s.fail(vExpiredWithEffect, i, -1)
	}
	if b := m.msgs[i].bk; b >= 0 {
		for j := range m.ids {
			if j != i && m.msgs[j].bk == b && s.ID[j].Remote > 0 {
				s.fail(vBusinessKeyTwice, i, j)
			}
		}
	}
}

// checkFirstOutcome runs before identity i's outcome is written: a final
// outcome is never replaced (a redrive first makes it ready again).
func (m *Model) checkFirstOutcome(s *State, i int) {
	if st := s.ID[i].Status; st.final() {
		s.fail(vSettledTwice, i, int(st))
	}
}

// checkAck runs when a copy of message msg is acknowledged.
func (m *Model) checkAck(s *State, msg int) {
	if s.ID[m.msgs[msg].id].Status == none && !s.Collided[msg] {
		s.fail(vAckBeforeCommit, m.msgs[msg].id, -1)
	}
}

// checkState runs after every step.
func (m *Model) checkState(s *State) {
	for i := range m.ids {
		if s.ID[i].Released && s.ID[i].Status != skipped {
			s.fail(vReleasedRunsAgain, i, int(s.ID[i].Status))
		}
	}
	for k := range m.keys {
		if b := s.Key[k].Blocked; b >= 2 && m.msgs[b-2].key != k {
			s.fail(vForeignBlock, k, int(b-2))
		}
	}
}

// unfinished returns an identity that has no final outcome in s, -1 when
// s is quiet: every identity final, its copies acknowledged and its
// workers idle, unless it awaits an operator's decision.
func (m *Model) unfinished(s *State) int {
	for i := range m.ids {
		if !s.ID[i].Status.final() && !m.awaitingOperator(s, i, 0) && !m.lostBeforeKept(s, i) {
			return i
		}
	}
	for c := range m.copies {
		if i := m.msgs[m.copies[c].msg].id; s.Copy[c] != acked && s.Copy[c] != lost && !m.awaitingOperator(s, i, 0) {
			return i
		}
	}
	for w := range m.workers {
		if i := m.msgs[s.Worker[w].Msg].id; s.Worker[w].Phase != idle && !m.awaitingOperator(s, i, 0) {
			return i
		}
	}
	return -1
}

// awaitingOperator: identity i waits for an operator's decision: parked
// behind a blocked key, or waiting for its business key held by one that
// does.
func (m *Model) awaitingOperator(s *State, i, depth int) bool {
	id := &s.ID[i]
	if k := m.msgs[i].key; (id.Status == held || id.Status == blocked) && k >= 0 && s.Key[k].Blocked != 0 {
		return true
	}
	if id.Status == none && id.Turn && !s.alive(m, i) && !s.busyOn(m, i) && s.lostAny(m, i) {
		return true // its message was lost holding its turn: keys release ends it
	}
	b := m.msgs[i].bk
	if b < 0 || id.Status.final() || depth > m.ids {
		return false
	}
	for j := range m.ids {
		if j != i && m.msgs[j].bk == b && s.ID[j].Turn && !s.ID[j].Status.final() && m.awaitingOperator(s, j, depth+1) {
			return true
		}
	}
	return false
}

// lostBeforeKept: the broker lost identity i's copies before anything of
// it but a turn was kept, and its turn is gone: nothing is left to settle.
func (m *Model) lostBeforeKept(s *State, i int) bool {
	id := &s.ID[i]
	return id.Status == none && !id.Turn && s.lostAny(m, i) && !s.alive(m, i) && !s.busyOn(m, i)
}
