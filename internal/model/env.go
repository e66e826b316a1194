package model

// brokerSteps: a lease runs out. An orphaned copy (its worker died)
// always comes back; a live worker's only within the Expiries budget (a
// slow step outliving its lease).
func (m *Model) brokerSteps(s *State, emit func(step, *State)) {
	for c := range m.copies {
		cs := s.Copy[c]
		if i := m.msgs[m.copies[c].msg].id; s.Losses > 0 && (cs == queued || cs == orphan || cs >= leased) &&
			s.ID[i].Turn && s.ID[i].Status == none {
			// The broker loses a copy of a message that holds its key's
			// turn: it never comes back (a worker still on it goes on).
			try(s, step{kind: stLose, x: int8(c)}, emit, func(t *State) {
				t.Losses--
				t.Copy[c] = lost
			})
		}
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
		if m.msgs[s.ID[i].Sent].poison { // the payload the agent received
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
	if m.b.Deadline && !s.Late {
		try(s, step{kind: stDeadline}, emit, func(t *State) { t.Late = true })
	}
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
		if s.keyLocked(m, k) {
			continue // the sweep's transaction waits for the key's lock
		}
		if j := m.deadTurn(s, k); j >= 0 && !m.mut(TurnWithoutWayOut) {
			// The sweep: a held message's hold runs out over a turn whose
			// message was not seen for the broker's redelivery window and
			// has no live claim; the turn ends (a skipped dead letter) and
			// the hold expiry goes on (HoldExpiry block: the key blocks).
			m.reach(gEndTurn)
			try(s, step{kind: stEndTurn, x: int8(j)}, emit, func(t *State) {
				m.endTurn(t, j)
				m.blockByHold(t, k)
			})
		}
		if n := s.nextParked(m, k); n >= 0 && s.Key[k].Blocked == 0 && m.nextInLine(s, k, n) && s.turnElsewhere(m, k, n) {
			// The sweep: the hold of a message next in line (no gap)
			// that waits behind a predecessor's turn passes; unparking
			// looks at the turn first and lets nothing out.
			m.reach(gDrainTurnHeld)
			if m.mut(UnparkPastTurn) {
				try(s, step{kind: stSweepUnpark, x: int8(k)}, emit, func(t *State) { m.unpark(t, k) })
			}
		}
		if m.holdDue(s, k) {
			try(s, step{kind: stHoldExpire, x: int8(k)}, emit, func(t *State) { m.blockByHold(t, k) })
		}
	}
	if m.mut(TurnWithoutWayOut) {
		return
	}
	for j := range m.ids {
		// The sweep ends an unkeyed turn (it reserves only its business
		// key) whose message was not seen for the broker's redelivery
		// window and has no live claim (turn_end.go, endStaleTurns). A
		// keyed one goes by its held successor's hold expiry above.
		id := &s.ID[j]
		if m.msgs[j].key >= 0 || !id.Turn || id.Status != none || id.Claim >= claimLive || s.alive(m, j) {
			continue
		}
		m.reach(gEndStaleTurn)
		try(s, step{kind: stEndTurn, x: int8(j)}, emit, func(t *State) { m.endTurn(t, j) })
	}
}

// nextInLine: parked identity n of key k may run by its version alone:
// unversioned (arrival order), a baseline, exactly next or already passed.
func (m *Model) nextInLine(s *State, k, n int) bool {
	v, ver := m.msgs[s.ID[n].Hash].ver, int(s.Key[k].Ver)
	return v == 0 || ver == 0 || v <= ver+1
}

// blockByHold ends key k's expired hold as HoldExpiry says: block (its
// held messages wait for an operator) or advance (the gap up to the next
// parked version is recorded and the key unparks).
func (m *Model) blockByHold(s *State, k int) {
	if m.b.HoldAdvance {
		if n := s.nextParked(m, k); n >= 0 {
			if v := m.msgs[s.ID[n].Hash].ver; v > 0 {
				m.skipTo(s, k, v-1)
			}
		}
		m.unpark(s, k)
		return
	}
	s.Key[k].Blocked = blockedByHold
	for i := range m.ids {
		if m.msgs[i].key == k && s.ID[i].Status == held {
			s.ID[i].Status = blocked
		}
	}
}

// keyLocked: PostgreSQL, and a worker's open transaction holds key k's
// lock (it read, and has not committed).
func (s *State) keyLocked(m *Model, k int) bool {
	for w := range m.workers {
		if s.Worker[w].Phase == reserve && m.msgs[s.Worker[w].Msg].key == k {
			return true
		}
	}
	return false
}

// alive: a copy of identity i is still in the broker's hands (queued,
// leased, or orphaned and coming back).
func (s *State) alive(m *Model, i int) bool {
	for c := range m.copies {
		if m.msgs[m.copies[c].msg].id == i && s.Copy[c] != acked && s.Copy[c] != lost {
			return true
		}
	}
	return false
}

// lostAny: the broker lost a copy of identity i.
func (s *State) lostAny(m *Model, i int) bool {
	for c := range m.copies {
		if m.msgs[m.copies[c].msg].id == i && s.Copy[c] == lost {
			return true
		}
	}
	return false
}

// turnHolder is the identity holding key k's turn, -1 if none.
func (s *State) turnHolder(m *Model, k int) int {
	for j := range m.ids {
		if m.msgs[j].key == k && s.ID[j].Turn && !s.ID[j].Status.final() {
			return j
		}
	}
	return -1
}

// deadTurn is the identity holding key k's turn whose hold-expiry sweep
// may end it (turn_end.go): a held message waits on the free key, and the
// holder, nothing of it kept but its turn, was not seen for the broker's
// redelivery window (no copy of it is in the broker's hands: the window
// is longer than any redelivery) and has no live decision claim; -1 if
// none.
func (m *Model) deadTurn(s *State, k int) int {
	if s.Key[k].Blocked != 0 || s.nextParked(m, k) < 0 {
		return -1
	}
	j := s.turnHolder(m, k)
	if j < 0 || s.ID[j].Status != none || s.alive(m, j) {
		return -1
	}
	if s.ID[j].Claim >= claimLive {
		m.reach(gEndTurnClaimLive)
		return -1
	}
	return j
}

// decidedNotApplied: identity j's decision is recorded and it has not
// applied: no operator's release ends its turn (operator.go,
// decidedNotApplied; an attacker's release over an apply that waited on a
// lock ended the event the agent applied dead-lettered).
func (m *Model) decidedNotApplied(s *State, j int) bool {
	return s.ID[j].Decided
}

// callOpen: identity i's call through the ledger is pending or uncertain,
// so no operator's skip or release ends it and lets its successors go
// (operator.go, callOpen): its caller may be frozen with the request
// still open, or the call may have taken effect. The sweep, past the
// redelivery window, ends such a turn all the same (turn_end.go).
func (m *Model) callOpen(s *State, i int) bool {
	if !s.ID[i].Ledger.unresolved() {
		return false
	}
	m.reach(gCallOpen)
	return true
}

// endTurn ends identity j's turn, which will not come back: a dead letter
// resolved as skipped, the identity recorded dead-lettered (final: should
// a copy come back after all, it is a duplicate).
func (m *Model) endTurn(s *State, j int) {
	m.checkFirstOutcome(s, j)
	id := &s.ID[j]
	parkedCopy := id.Status == ready
	id.Status, id.Turn, id.Released = skipped, false, true
	if parkedCopy {
		// Let out of the parked table: its parked copy goes with its
		// turn, into the dead letter (turn_end.go, unparkEnded).
		m.reach(gReleaseParkedHolder)
		if m.mut(ReleaseKeepsParkedCopy) {
			id.Status = held // kept: let out with the key's others
		}
	}
	if id.Hash < 0 {
		id.Hash = id.TurnMsg
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
	if s.turnHeld(m, k) {
		m.reach(gHoldTurnHeld)
		return false
	}
	return true
}

// operatorSteps: redrive or skip a dead letter, release a key whose hold
// ran out, or end a key's turn (keys release of a key that is not
// blocked), within the Ops budget.
func (m *Model) operatorSteps(s *State, emit func(step, *State)) {
	for i := range m.ids {
		if id := s.ID[i]; (id.Ledger == uncertainFresh || id.Ledger == uncertainOld) && id.InFlight == 0 && !s.calling(m, i) && id.Claim < claimLive {
			// seqbox effects resolve: the operator looks at the remote
			// side, which no request of the call can still reach, and
			// records what it shows, while nobody decides the message; an open call's message then has its
			// way out again (callOpen).
			// It takes no operator action of the budget: like the
			// sweep, it is what eventually happens to a call nobody
			// reconciles (its message lost), and it leaves nothing to
			// resolve again.
			try(s, step{kind: stResolve, x: int8(i)}, emit, func(t *State) {
				if t.ID[i].Remote > 0 {
					t.ID[i].Ledger = succeeded
				} else {
					t.ID[i].Ledger = failed
				}
			})
		}
	}
	if s.Ops == 0 {
		return
	}
	for i := range m.ids {
		k := m.msgs[i].key
		if k >= 0 && s.keyLocked(m, k) {
			continue // the operator's transaction waits for the key's lock
		}
		if s.ID[i].Status == dead {
			try(s, step{kind: stRedrive, x: int8(i)}, emit, func(t *State) {
				t.Ops--
				id := &t.ID[i]
				id.Status, id.Attempts = ready, 0
				id.credit() // a redrive asks again
				m.takeTurn(t, i, int(id.Hash))
			})
		}
		// A dead letter blocking its key stays open while its redrive
		// runs (ready): it can be skipped then too, unless its decision
		// is being asked right now (ErrBeingDecided).
		if m.b.DeadLetterRelease && s.ID[i].Status == dead {
			// A dead letter that blocks nothing is resolved alone.
			try(s, step{kind: stSkip, x: int8(i)}, emit, func(t *State) {
				t.Ops--
				t.ID[i].Status = skipped
			})
		}
		open := s.ID[i].Status == dead || s.ID[i].Status == ready
		if !open || k < 0 || s.Key[k].Blocked != blockedBy(i) {
			continue
		}
		if s.ID[i].Claim >= claimLive && !m.mut(SkipWhileDeciding) {
			m.reach(gSkipBeingDecided)
			continue
		}
		if m.callOpen(s, i) {
			continue
		}
		try(s, step{kind: stSkip, x: int8(i)}, emit, func(t *State) {
			t.Ops--
			t.ID[i].Status, t.ID[i].Turn = skipped, false
			m.unblock(t, k)
			if v := m.msgs[i].ver; v > 0 {
				m.skipTo(t, k, v)
			}
			m.unpark(t, k)
		})
	}
	for k := range m.keys {
		if s.keyLocked(m, k) {
			continue
		}
		if s.Key[k].Blocked == 0 && !m.mut(TurnWithoutWayOut) && s.nextParked(m, k) >= 0 {
			// keys release of a key held behind a turn: the turn ends
			// (a skipped dead letter, naming who and why), the gap up to
			// the next parked version is recorded, the key unparks.
			// The holder is either nothing but its turn, or a message let
			// out of the parked table that waits to be decided again.
			if j := s.turnHolder(m, k); j >= 0 && (s.ID[j].Status == none || s.ID[j].Status == ready) && !s.busyOn(m, j) {
				if s.ID[j].Claim >= claimLive {
					m.reach(gEndTurnClaimLive)
				} else if m.decidedNotApplied(s, j) {
					m.reach(gReleaseDecided)
				} else if !m.callOpen(s, j) {
					m.reach(gReleaseTurn)
					try(s, step{kind: stReleaseTurn, x: int8(k)}, emit, func(t *State) {
						t.Ops--
						m.endTurn(t, j)
						m.releaseKey(t, k)
					})
				}
			}
		}
		if s.Key[k].Blocked != blockedByHold {
			continue
		}
		try(s, step{kind: stRelease, x: int8(k)}, emit, func(t *State) {
			t.Ops--
			m.releaseKey(t, k)
		})
	}
}

// releaseKey unblocks key k, records the gap up to its next parked
// version and unparks it.
func (m *Model) releaseKey(s *State, k int) {
	m.unblock(s, k)
	if n := s.nextParked(m, k); n >= 0 {
		if v := m.msgs[s.ID[n].Hash].ver; v > 0 {
			m.skipTo(s, k, v-1)
		}
	}
	m.unpark(s, k)
}
