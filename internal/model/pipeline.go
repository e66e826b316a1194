package model

// pipeline is one delivery's transaction (docs/design.md §5): inbox, ordering
// gate, business key, then either the effect (when the decision is
// recorded) or the key's turn, and the drain. It runs atomically: a crash
// before it commits is a crash before it started. It leaves the worker at
// its next phase.
func (m *Model) pipeline(s *State, w int) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	i := msg.id
	id := &s.ID[i]
	fromParked := wk.Copy < 0
	// 2. The inbox row: the primary key decides.
	if !m.mut(NoInboxInsert) && (id.Status != none && !(fromParked && id.Status == ready)) {
		if int(id.Hash) != int(wk.Msg) {
			s.Collided[wk.Msg] = true
		}
		wk.Phase = finish // duplicate or collision
		return
	}
	// 3. The ordering gate (docs/design.md §5 step 4).
	if k := msg.key; k >= 0 && !m.mut(GateSkipped) && !(m.mut(DecideBeforeGate) && !id.Decided) {
		key := &s.Key[k]
		switch {
		case key.Blocked != 0 && key.Blocked != blockedBy(i):
			m.park(s, w, blocked)
			return
		case msg.ver > 0 && key.Ver > 0 && msg.ver <= int(key.Ver):
			m.settle(s, w, stale) // passed already: it waits behind no turn
			return
		case s.turnElsewhere(m, k, i):
			m.park(s, w, held)
			return
		case msg.ver > 0 && key.Ver > 0 && msg.ver > int(key.Ver)+1:
			m.park(s, w, held) // a gap
			return
		}
		if !id.Passed {
			m.checkOneAtATime(s, k, i)
			id.Passed = true
		}
	}
	// 4. The business key (docs/design.md §5 step 3): applied elsewhere, or being decided elsewhere
	// (after the gate, as the library has it: a key's turn comes first).
	if msg.bk >= 0 && !(m.mut(DecideBeforeSemanticCheck) && !id.Decided) {
		if s.bkApplied(m, msg.bk, i) {
			m.settle(s, w, semDup)
			return
		}
		if !m.mut(BusinessKeyNotReserved) && s.bkInFlight(m, msg.bk, i) {
			m.takeTurn(s, i)
			m.nack(s, w, false)
			return
		}
		if s.bkUncertain(m, msg.bk, i) {
			// Its effect may have happened under a dead letter: only an
			// operator can tell; asking again could do it twice.
			m.deadLetter(s, w)
			return
		}
	}
	// 5. The decision: recorded, or asked outside the transaction.
	if !id.Decided {
		m.takeTurn(s, i)
		wk.Phase = claim
		return
	}
	m.apply(s, w)
}

// apply runs the effect, advances the key and drains (steps 5 to 7).
func (m *Model) apply(s *State, w int) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	id := &s.ID[msg.id]
	m.checkFirstOutcome(s, msg.id)
	id.Effects++
	m.checkApply(s, msg)
	id.Status, id.Hash, id.Turn = applied, wk.Msg, false
	wk.Phase = finish
	if msg.key < 0 {
		return
	}
	key := &s.Key[msg.key]
	if msg.ver > 0 {
		key.Ver, key.LastApplied = int8(msg.ver), int8(msg.ver)
	}
	if key.Blocked == blockedBy(msg.id) {
		m.unblock(s, msg.key) // its redrive applied
	}
	m.drain(s, msg.key)
}

// settle records a final outcome other than applied and drains.
func (m *Model) settle(s *State, w int, st status) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	id := &s.ID[msg.id]
	m.checkFirstOutcome(s, msg.id)
	if st == stale {
		m.checkStale(s, msg.id)
	}
	id.Status, id.Hash, id.Turn = st, wk.Msg, false
	wk.Phase = finish
	if msg.key < 0 {
		return
	}
	if key := &s.Key[msg.key]; st == semDup && msg.ver > int(key.Ver) {
		// The object still moves to its version; only the effect is
		// suppressed, so its successors are not held behind it.
		key.Ver, key.LastApplied = int8(msg.ver), int8(msg.ver)
	}
	m.drain(s, msg.key)
}

// park writes the message to the parked table; the copy is then acked.
func (m *Model) park(s *State, w int, st status) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	id := &s.ID[msg.id]
	if !id.Status.parked() {
		id.ParkSeq = s.nextParkSeq(m, msg.key)
	}
	id.Status, id.Hash = st, wk.Msg
	wk.Phase = finish
}

// takeTurn writes the identity's turn row (unless a mutant forgets it).
func (m *Model) takeTurn(s *State, i int) {
	id := &s.ID[i]
	if id.Turn || m.mut(TurnNotDurable) {
		return
	}
	var seq uint8
	for j := range m.ids {
		if s.ID[j].Turn {
			seq = max(seq, s.ID[j].TurnSeq)
		}
	}
	id.Turn, id.TurnSeq = true, seq+1
}

// drain lets the key's next parked message out (step 7): the oldest
// unversioned one, or the next version; a passed version settles stale.
// The one let out takes the key's turn and waits, ready, for a worker to
// decide and run it.
func (m *Model) drain(s *State, k int) {
	for {
		key := &s.Key[k]
		if key.Blocked != 0 || s.turnHeld(m, k) {
			return
		}
		next := s.nextParked(m, k)
		if next < 0 {
			return
		}
		v := m.msgs[s.ID[next].Hash].ver
		if v > 0 && key.Ver > 0 && v > int(key.Ver)+1 {
			return // still a gap: it waits, its hold running
		}
		if v > 0 && key.Ver > 0 && v <= int(key.Ver) {
			m.checkStale(s, next)
			s.ID[next].Status, s.ID[next].Turn = stale, false
			continue
		}
		s.ID[next].Status = ready
		m.takeTurn(s, next)
		return
	}
}

// unblock frees key k: its blocked messages wait as held again.
func (m *Model) unblock(s *State, k int) {
	s.Key[k].Blocked = 0
	for i := range m.ids {
		if m.msgs[i].key == k && s.ID[i].Status == blocked {
			s.ID[i].Status = held
		}
	}
}

// skipTo records a gap decision: versions up to v are passed over.
func (m *Model) skipTo(s *State, k, v int) {
	key := &s.Key[k]
	if v <= int(key.Ver) {
		return
	}
	for u := int(key.Ver) + 1; u <= v; u++ {
		key.Gaps |= 1 << u
	}
	key.Ver = int8(v)
	for i := range m.ids {
		id := &s.ID[i]
		if m.msgs[i].key == k && id.Passed && !id.Status.final() && m.msgs[i].ver > 0 && m.msgs[i].ver <= v {
			id.Overtaken = true
		}
	}
}
