package model

// pipeline is one delivery's transaction (docs/design.md §5): inbox, ordering
// gate, business key, then either the effect (when the decision is
// recorded) or the key's turn, and the unparking. It runs atomically: a crash
// before it commits is a crash before it started. It leaves the worker at
// its next phase.
func (m *Model) pipeline(s *State, w int) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	i := msg.id
	id := &s.ID[i]
	fromParked := wk.Copy < 0
	passed := id.Passed
	// 2. The inbox row: the primary key decides.
	if !m.mut(NoInboxInsert) && (id.Status != none && !(fromParked && id.Status == ready)) {
		if int(id.Hash) != int(wk.Msg) {
			m.reach(gInboxCollision)
			s.Collided[wk.Msg] = true
		} else {
			m.reach(gInboxDuplicate)
		}
		wk.Phase = finish // duplicate or collision
		return
	}
	// 3. The ordering gate (docs/design.md §5, "Ordering gate").
	if k := msg.key; k >= 0 && !m.mut(GateSkipped) && !(m.mut(DecideBeforeGate) && !id.Decided) {
		key := &s.Key[k]
		switch {
		case key.Blocked != 0 && key.Blocked != blockedBy(i):
			m.reach(gGateBlocked)
			m.park(s, w, blocked)
			return
		case msg.ver > 0 && key.Ver > 0 && msg.ver <= int(key.Ver) && !m.mut(StaleCheckSkipped):
			m.reach(gGateStale)
			m.endWith(s, w, stale) // passed already: it waits behind no turn
			return
		case s.turnElsewhere(m, k, i):
			m.reach(gGateTurnElsewhere)
			m.park(s, w, held)
			return
		case m.expires(s, i):
			m.expire(s, w)
			return
		case msg.ver > 0 && key.Ver > 0 && msg.ver > int(key.Ver)+1 && !m.b.GapAdvance:
			m.reach(gGateGap)
			m.park(s, w, held) // a gap
			return
		}
		if !id.Passed {
			m.checkOneAtATime(s, k, i)
			id.Passed = true
		}
	} else if m.expires(s, i) {
		m.expire(s, w)
		return
	}
	// 4. The business key (docs/design.md §5, "Business key"): applied elsewhere, or being decided elsewhere
	// (after the gate, as the library has it: a key's turn comes first).
	if msg.bk >= 0 && !(m.mut(DecideBeforeSemanticCheck) && !id.Decided) {
		if s.bkApplied(m, msg.bk, i) {
			m.reach(gBKApplied)
			m.endWith(s, w, semDup)
			return
		}
		if !m.mut(BusinessKeyNotReserved) && s.bkInFlight(m, msg.bk, i) {
			m.reach(gBKInFlight)
			if m.takeTurn(s, i, int(wk.Msg)) {
				m.reach(gTurnBound)
				m.collide(s, w)
				return
			}
			m.nack(s, w, false)
			return
		}
		if s.bkUncertain(m, msg.bk, i) {
			// Its effect may have happened under a dead letter: only an
			// operator can tell; asking again could do it twice.
			m.reach(gBKUncertain)
			m.deadLetter(s, w)
			return
		}
	}
	// 5. The decision: recorded, or asked outside the transaction. Both
	// belong to the copy they were made for: another payload under the
	// identity is a collision (docs/design.md §10.2).
	if m.b.Plain {
		if msg.poison {
			m.deadLetter(s, w) // the handler fails for good
			return
		}
		m.apply(s, w)
		return
	}
	if id.Decided && int(id.DecFor) != int(wk.Msg) && !m.mut(DecisionNotBound) {
		m.reach(gDecisionBound)
		m.collide(s, w)
		return
	}
	if !id.Decided {
		if m.b.Postgres && msg.bk >= 0 {
			// READ COMMITTED: the business key was read free; the turn
			// is written when the transaction commits, a step later.
			// Without the lock (the mutant) its place among the turns is
			// the clock of this read.
			wk.Phase, wk.Seq = reserve, s.nextTurnSeq(m)
			id.Passed = passed // nothing of it is committed yet
			return
		}
		if m.takeTurn(s, i, int(wk.Msg)) {
			m.reach(gTurnBound)
			m.collide(s, w)
			return
		}
		m.preClaim(s, w, i)
		wk.Phase = claim
		return
	}
	m.apply(s, w)
}

// preClaim is the decision's claim taken in the transaction that takes
// the turn (turn.go, preClaim): free, it becomes w's; held (alive, by
// another decider), it stays theirs, and the claim step finds that. The
// claim step and the ledger step still look at the claim: the code skips
// its re-check within a heartbeat of the claim, when no expiry can have
// come between (a bound on time the model does not keep), so checking it
// here explores more, not less.
func (m *Model) preClaim(s *State, w, i int) {
	if s.ID[i].Claim == unclaimed {
		s.ID[i].Claim = claimLive + claimState(w)
	}
}

// reserveCommit is the commit of a PostgreSQL transaction that read its
// business key free: the turn row is written.
func (m *Model) reserveCommit(s *State, w int) {
	wk := &s.Worker[w]
	i := m.msgs[wk.Msg].id
	if k := m.msgs[wk.Msg].key; k >= 0 && !s.ID[i].Passed {
		m.checkOneAtATime(s, k, i) // its gate passed at the read
		s.ID[i].Passed = true
	}
	seq := wk.Seq
	if !m.mut(BusinessKeyCheckUnlocked) {
		seq = 0 // under the lock, commit order: after the latest turn
	}
	if m.takeTurnAt(s, i, int(wk.Msg), seq) {
		m.reach(gTurnBound)
		m.collide(s, w)
		return
	}
	m.preClaim(s, w, i)
	wk.Phase, wk.Seq = claim, 0
}

// locked: PostgreSQL, and another worker's open transaction holds a lock
// msg needs: its partition key's (the key's row, always) or its business
// key's (the fix of issue 36 class 1; the mutant takes none).
func (m *Model) locked(s *State, w int, msg message) bool {
	if !m.b.Postgres {
		return false
	}
	for o := range m.workers {
		if o == w || s.Worker[o].Phase != reserve {
			continue
		}
		other := m.msgs[s.Worker[o].Msg]
		if msg.key >= 0 && other.key == msg.key {
			return true
		}
		if msg.bk >= 0 && other.bk == msg.bk && !m.mut(BusinessKeyCheckUnlocked) {
			m.reach(gBKLockWait)
			return true
		}
	}
	return false
}

// collide ends a copy whose identity's turn or decision belongs to
// another copy, with another payload: a collision, parked for
// investigation; nothing of it is decided, sent or applied.
func (m *Model) collide(s *State, w int) {
	s.Collided[s.Worker[w].Msg] = true
	s.Worker[w].Phase, s.Worker[w].Seq = finish, 0
}

// apply runs the effect, advances the key and unparks (steps 5 to 7).
func (m *Model) apply(s *State, w int) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	id := &s.ID[msg.id]
	m.checkFirstOutcome(s, msg.id)
	if m.b.GapAdvance && msg.key >= 0 && msg.ver > 0 && s.Key[msg.key].Ver > 0 {
		m.skipTo(s, msg.key, msg.ver-1) // GapPolicy=advance: the gap is recorded as it applies
	}
	id.Effects++
	m.checkApply(s, msg, int(wk.Msg))
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
		m.reach(gRedriveApplied)
		m.unblock(s, msg.key) // its redrive applied
	}
	m.unpark(s, msg.key)
}

// endWith records a final outcome other than applied and unparks its key's successors.
func (m *Model) endWith(s *State, w int, st status) {
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
	m.unpark(s, msg.key)
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

// takeTurn writes the identity's turn row (unless a mutant forgets it),
// bound to message msg's payload, after the latest turn. It reports
// whether the turn is bound to another copy, with another payload: then
// nothing changes.
func (m *Model) takeTurn(s *State, i, msg int) bool { return m.takeTurnAt(s, i, msg, 0) }

// takeTurnAt is takeTurn at place seq among the turns (0: after the
// latest).
func (m *Model) takeTurnAt(s *State, i, msg int, seq uint8) bool {
	id := &s.ID[i]
	if id.Turn && int(id.TurnMsg) != msg && !m.mut(TurnNotBound) {
		return true
	}
	if id.Turn || m.mut(TurnNotDurable) {
		return false
	}
	if seq == 0 {
		seq = s.nextTurnSeq(m)
	}
	id.Turn, id.TurnSeq, id.TurnMsg = true, seq, int8(msg)
	return false
}

// nextTurnSeq is the place after the latest turn.
func (s *State) nextTurnSeq(m *Model) uint8 {
	var seq uint8
	for j := range m.ids {
		if s.ID[j].Turn {
			seq = max(seq, s.ID[j].TurnSeq)
		}
	}
	return seq + 1
}

// unpark lets the key's next parked message out (step 7): the oldest
// unversioned one, or the next version; a passed version ends stale.
// The one let out takes the key's turn and waits, ready, for a worker to
// decide and run it.
func (m *Model) unpark(s *State, k int) {
	for {
		key := &s.Key[k]
		next := s.nextParked(m, k)
		if key.Blocked != 0 || next < 0 {
			return
		}
		if s.turnElsewhere(m, k, next) { // its own turn (a retry row) is no predecessor's
			m.reach(gDrainTurnHeld)
			if !m.mut(UnparkPastTurn) {
				return
			}
		}
		v := m.msgs[s.ID[next].Hash].ver
		if v > 0 && key.Ver > 0 && v > int(key.Ver)+1 && !m.b.GapAdvance {
			m.reach(gDrainGap)
			return // still a gap: it waits, its hold running
		}
		if v > 0 && key.Ver > 0 && v <= int(key.Ver) {
			m.reach(gDrainStale)
			m.checkStale(s, next)
			s.ID[next].Status, s.ID[next].Turn = stale, false
			continue
		}
		s.ID[next].Status = ready
		m.takeTurn(s, next, int(s.ID[next].Hash))
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

// expires: the deadline passed and identity i has no decision
// (expiredUndecided). A decider's live claim says its call may be
// running: a call that takes effect applies, so the copy goes on to meet
// the claim (the mutant expires it anyway).
func (m *Model) expires(s *State, i int) bool {
	id := &s.ID[i]
	if !s.Late || id.Decided || m.b.Plain {
		return false
	}
	if id.Claim >= claimLive && !m.mut(ExpiryUnderLiveCall) {
		m.reach(gExpiryUnderClaim)
		return false
	}
	// A call of it took effect or may have (a dead caller's pending or
	// uncertain row, a success its decider did not record): it is
	// resolved, not expired; the decider reconciles it.
	if id.Ledger.touched() && !m.mut(ExpiryOverUncertainCall) && !m.mut(ExpiryUnderLiveCall) {
		m.reach(gExpiryOverCall)
		return false
	}
	return true
}

// expire ends w's message expired; the key's next version records its
// gap, so its successors are not held for it.
func (m *Model) expire(s *State, w int) {
	m.reach(gExpired)
	msg := m.msgs[s.Worker[w].Msg]
	if s.ID[msg.id].Remote > 0 {
		s.fail(vExpiredWithEffect, msg.id, -1)
	}
	if k := msg.key; k >= 0 && msg.ver > 0 && s.Key[k].Ver > 0 && msg.ver == int(s.Key[k].Ver)+1 {
		m.skipTo(s, k, msg.ver)
	}
	m.endWith(s, w, expired)
}

// skipTo records a gap decision: versions up to v are passed over.
func (m *Model) skipTo(s *State, k, v int) {
	key := &s.Key[k]
	if v <= int(key.Ver) {
		return
	}
	for u := int(key.Ver) + 1; u <= v && !m.mut(SkipRecordsNoGap); u++ {
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
