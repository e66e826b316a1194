package model

// brokerSteps: a lease runs out. An orphaned copy (its worker died)
// always comes back; a live worker's only within the Expiries budget (a
// slow step outliving its lease).
func (m *Model) brokerSteps(s *State, emit func(step, *State)) {
	for c := range m.copies {
		cs := s.Copy[c]
		if cs == orphan || (cs >= leased && s.Expiries > 0) {
			try(s, step{kind: stLeaseExpire, x: int8(c)}, emit, func(t *State) {
				if cs != orphan {
					t.Expiries--
				}
				t.Copy[c] = queued
			})
		}
	}
}

// remoteSteps: the remote side takes a request in flight and applies it
// (answering a waiting caller), refuses it (transiently, with a redirect,
// or for good when the message is poison), or loses it.
func (m *Model) remoteSteps(s *State, emit func(step, *State)) {
	for i := range m.ids {
		if s.ID[i].InFlight == 0 {
			continue
		}
		try(s, step{kind: stDrop, x: int8(i)}, emit, func(t *State) { t.ID[i].InFlight-- })
		answers := []answer{answerOK}
		if m.msgs[i].poison {
			answers = []answer{answerPermanent}
		}
		if s.Failures > 0 {
			answers = append(answers, answerFail, answerRedirect)
		}
		for _, a := range answers {
			heard := false
			for w := range m.workers {
				if wk := s.Worker[w]; wk.Phase == await && wk.Answer == noAnswer && m.msgs[wk.Msg].id == i {
					heard = true
					try(s, step{kind: stAnswer, w: int8(w), x: int8(i), a: a}, emit, func(t *State) {
						m.answer(t, i, a)
						t.Worker[w].Answer, t.Worker[w].Phase = a, record
					})
				}
			}
			if !heard && a == answerOK {
				// Applied, and nobody hears it (the caller timed out or died).
				try(s, step{kind: stAnswer, w: -1, x: int8(i), a: a}, emit, func(t *State) { m.answer(t, i, a) })
			}
		}
	}
}

// answer is the remote side's part of an answer.
func (m *Model) answer(s *State, i int, a answer) {
	s.ID[i].InFlight--
	switch a {
	case answerOK:
		s.ID[i].Remote++
		m.checkRemote(s, i)
	case answerFail, answerRedirect:
		s.Failures--
	}
}

// clockSteps: heartbeats stop counting, leases and holds run out.
func (m *Model) clockSteps(s *State, emit func(step, *State)) {
	for i := range m.ids {
		id := s.ID[i]
		x := int8(i)
		switch {
		case id.Claim == claimDead && !m.mut(ClaimOutlivesProcess):
			try(s, step{kind: stClaimExpire, x: x}, emit, func(t *State) { t.ID[i].Claim = unclaimed })
		case id.Claim >= claimLive && s.Expiries > 0:
			try(s, step{kind: stHeartbeatLoss, x: x}, emit, func(t *State) {
				t.Expiries--
				t.ID[i].Claim = unclaimed
				t.ID[i].credit() // its call may be abandoned: the claim is lost
			})
		}
		switch {
		case id.Ledger == pendingDead && !m.mut(PendingWithoutLease):
			try(s, step{kind: stLedgerLease, x: x}, emit, func(t *State) {
				t.ID[i].Ledger = uncertainFresh
				t.ID[i].credit()
			})
		case id.Ledger == pending && s.Expiries > 0:
			try(s, step{kind: stLedgerLeaseLoss, x: x}, emit, func(t *State) {
				t.Expiries--
				t.ID[i].Ledger = uncertainFresh
				t.ID[i].credit()
			})
		case id.Ledger == uncertainFresh && id.InFlight == 0 && !s.calling(m, i):
			// The call timeout passed: no request of it can still apply
			// (a live caller's own timeout started before it sent one).
			try(s, step{kind: stLedgerAge, x: x}, emit, func(t *State) { t.ID[i].Ledger = uncertainOld })
		}
	}
	if m.mut(HoldWithoutDeadline) {
		return
	}
	for k := range m.keys {
		if m.holdDue(s, k) {
			try(s, step{kind: stHoldExpire, x: int8(k)}, emit, func(t *State) {
				t.Key[k].Blocked = blockedByHold
				for i := range m.ids {
					if m.msgs[i].key == k && t.ID[i].Status == held {
						t.ID[i].Status = blocked
					}
				}
			})
		}
	}
}

// calling: a live worker waits on a call for i.
func (s *State) calling(m *Model, i int) bool {
	for w := range m.workers {
		if wk := s.Worker[w]; wk.Phase == await && m.msgs[wk.Msg].id == i {
			return true
		}
	}
	return false
}

// holdDue: key k has a held message whose hold may run out (HoldExpiry
// block): the key is free, and no predecessor holds the key's turn (one
// that retries or is being decided keeps its successors waiting: the hold
// is then no gap).
func (m *Model) holdDue(s *State, k int) bool {
	if s.Key[k].Blocked != 0 || s.nextParked(m, k) < 0 {
		return false
	}
	return !s.turnHeld(m, k)
}

// operatorSteps: redrive or skip a dead letter, release a key whose hold
// ran out, within the Ops budget.
func (m *Model) operatorSteps(s *State, emit func(step, *State)) {
	if s.Ops == 0 {
		return
	}
	for i := range m.ids {
		if s.ID[i].Status != dead {
			continue
		}
		try(s, step{kind: stRedrive, x: int8(i)}, emit, func(t *State) {
			t.Ops--
			id := &t.ID[i]
			id.Status, id.Attempts = ready, 0
			id.credit() // a redrive asks again
			m.takeTurn(t, i)
		})
		k := m.msgs[i].key
		if k >= 0 && s.Key[k].Blocked == blockedBy(i) && s.ID[i].Claim < claimLive {
			// (Skip refuses while a redrive decides it: ErrBeingDecided.)
			try(s, step{kind: stSkip, x: int8(i)}, emit, func(t *State) {
				t.Ops--
				t.ID[i].Status = skipped
				m.unblock(t, k)
				if v := m.msgs[i].ver; v > 0 {
					m.skipTo(t, k, v)
				}
				m.drain(t, k)
			})
		}
	}
	for k := range m.keys {
		if s.Key[k].Blocked != blockedByHold {
			continue
		}
		try(s, step{kind: stRelease, x: int8(k)}, emit, func(t *State) {
			t.Ops--
			m.unblock(t, k)
			if n := t.nextParked(m, k); n >= 0 {
				if v := m.msgs[t.ID[n].Hash].ver; v > 0 {
					m.skipTo(t, k, v-1)
				}
			}
			m.drain(t, k)
		})
	}
}
