package model

// workerSteps are worker w's next steps: receive a copy or a message let
// out of the parked table, then the delivery's steps one at a time, or a
// crash at any of them.
func (m *Model) workerSteps(s *State, w int, emit func(step, *State)) {
	wk := s.Worker[w]
	st := step{w: int8(w)}
	if wk.Phase == idle {
		for c := range m.copies {
			if s.Copy[c] == queued {
				st.kind, st.x = stReceive, int8(c)
				try(s, st, emit, func(t *State) {
					t.Copy[c] = leasedTo(w)
					t.Worker[w] = worker{Phase: run, Copy: int8(c), Msg: int8(m.copies[c].msg)}
					if m.mut(AckBeforeCommit) {
						t.Worker[w].Phase = ackEarly
					}
				})
			}
		}
		for i := range m.ids {
			if s.ID[i].Status == ready && !s.busyOn(m, i) {
				st.kind, st.x = stPickup, int8(i)
				try(s, st, emit, func(t *State) {
					t.Worker[w] = worker{Phase: run, Copy: -1, Msg: t.ID[i].Hash}
				})
			}
		}
		return
	}
	i := m.msgs[wk.Msg].id
	st.x = int8(i)
	if s.Crashes > 0 {
		st.kind = stCrash
		try(s, st, emit, func(t *State) { m.crash(t, w) })
	}
	switch wk.Phase {
	case ackEarly:
		st.kind = stAckEarly
		try(s, st, emit, func(t *State) { m.ack(t, w); t.Worker[w].Phase = run })
	case run:
		if m.locked(s, w, m.msgs[wk.Msg]) {
			return // it waits for the other's commit
		}
		st.kind = stRun
		t := *s
		m.pipeline(&t, w)
		emit(st, &t)
		if t.ID[i].Effects > s.ID[i].Effects && s.Failures > 0 {
			// The handler fails transiently after its decision (or on
			// the plain path): the transaction rolls back to the
			// delivery's savepoint, the attempt is counted on the turn
			// row, which holds the key's turn, and the copy goes back.
			m.reach(gHandlerFails)
			st.kind = stHandlerFail
			try(s, st, emit, func(t *State) {
				t.Failures--
				m.takeTurn(t, i, int(wk.Msg))
				m.nack(t, w, true)
			})
		}
	case reserve:
		st.kind = stReserve
		try(s, st, emit, func(t *State) { m.reserveCommit(t, w) })
	case claim:
		st.kind = stClaim
		try(s, st, emit, func(t *State) { m.claim(t, w, i) })
	case ledger:
		st.kind = stLedger
		try(s, st, emit, func(t *State) { m.ledger(t, w, i) })
	case await:
		st.kind = stTimeout
		try(s, st, emit, func(t *State) {
			if t.ID[i].Ledger == pending && int(t.ID[i].Owner) == w {
				t.ID[i].Ledger = uncertainFresh
				t.ID[i].credit() // the call is recorded as lost
			}
			m.failAttempt(t, w, i)
		})
	case record:
		st.kind = stRecord
		try(s, st, emit, func(t *State) { m.record(t, w, i) })
	case finish:
		st.kind = stFinish
		try(s, st, emit, func(t *State) { m.ack(t, w); t.Worker[w] = worker{} })
	}
}

// claim is the decider's step before the call: its claim, taken with the
// turn (preClaim) or taken now, or a wait for another owner. A decider
// that stops here without asking drops the claim it holds.
func (m *Model) claim(s *State, w, i int) {
	id := &s.ID[i]
	own := id.Claim == claimLive+claimState(w)
	if own {
		m.reach(gClaimPreTaken)
	}
	// A claim the turn's transaction took, still w's, on a store with one
	// writer: that transaction read no decision and the identity
	// unsettled, and nothing decides or settles it under a live claim;
	// the decider does not look again (decider.go). On PostgreSQL it
	// does: its transaction's reads are not one snapshot.
	looks := !own || m.b.Postgres
	switch {
	case looks && id.Decided:
		m.reach(gClaimDecided)
		m.unclaim(s, w, i)
		s.Worker[w].Phase = run
	case looks && id.Status.final() && !id.Turn: // settled elsewhere
		m.reach(gClaimSettled)
		m.unclaim(s, w, i)
		s.Worker[w].Phase = run
	case id.Claim != unclaimed && !own:
		m.reach(gClaimElsewhere)
		m.nack(s, w, false) // in flight elsewhere: come back later
	case m.bkTaken(s, i):
		m.reach(gClaimBKTaken)
		m.unclaim(s, w, i)
		m.nack(s, w, false) // its business key, looked at again: the run again says
	case s.Late && !m.b.Plain && (!id.Ledger.touched() || m.mut(ExpiryOverUncertainCall)):
		// Past its deadline while it waited for its claim: not asked; its
		// run again finds no decision and ends it expired.
		m.reach(gClaimLate)
		m.unclaim(s, w, i)
		s.Worker[w].Phase = run
	default:
		if s.Late && !m.b.Plain {
			// Past it, but a call of it took effect or may have: its
			// ledger step resolves that call, and makes no new one.
			m.reach(gClaimLateTouched)
		}
		id.Claim = claimLive + claimState(w)
		s.Worker[w].Phase = ledger
	}
}

// bkTaken is the decider's second look at the business key, just before
// it asks: applied elsewhere, being decided ahead of it, or touched by a
// call of an identity that settled.
func (m *Model) bkTaken(s *State, i int) bool {
	b := m.msgs[i].bk
	if b < 0 || m.mut(BusinessKeyNotReserved) || m.mut(DecideBeforeSemanticCheck) {
		return false
	}
	return s.bkApplied(m, b, i) || s.bkInFlight(m, b, i) || s.bkUncertain(m, b, i)
}

// ledger reads the ledger row before the call (effects.Ledger.Do): a
// succeeded call is not made again, a live one is waited for, an
// uncertain one is reconciled first.
func (m *Model) ledger(s *State, w, i int) {
	id := &s.ID[i]
	if id.Claim != claimLive+claimState(w) {
		m.reach(gLedgerClaimLost)
		m.nack(s, w, false) // its claim was taken over before it asked: the new owner decides
		return
	}
	l := id.Ledger
	if m.mut(PendingWithoutLease) && l == pendingDead {
		l = pending
	}
	if m.mut(UncertainUnderLiveCall) && l == pending {
		l = uncertainOld // no lease: judged by its age alone, as abandoned
	}
	switch l {
	case succeeded:
		m.reach(gLedgerSucceeded)
		id.Decided, id.DecFor = true, s.Worker[w].Msg
		m.unclaim(s, w, i)
		s.Worker[w].Phase = run
	case pending:
		m.reach(gLedgerLive)
		m.unclaim(s, w, i)
		m.nack(s, w, false) // InFlightError: a wait, not a failure
	case pendingDead, uncertainFresh, uncertainOld:
		switch {
		case id.Remote > 0: // reconciled: it applied
			m.reach(gLedgerReconciledApplied)
			id.Ledger, id.Decided, id.DecFor = succeeded, true, s.Worker[w].Msg
			m.unclaim(s, w, i)
			s.Worker[w].Phase = run
		case l == uncertainOld || m.mut(ReconcileTooEarly): // reconciled: it did not
			m.reach(gLedgerReconciledNot)
			if m.late(s, w, i) {
				return
			}
			id.Ledger, id.Owner = pending, int8(w)
			m.ask(s, w, i)
		default: // a request may still be in flight: still uncertain
			m.reach(gLedgerStillUncertain)
			if id.Ledger == pendingDead {
				id.Ledger = uncertainFresh
				id.credit()
			}
			// effects.ReconcileWaitError: a wait until the call's
			// Timeout has passed, not a failure; no attempt is spent.
			m.unclaim(s, w, i)
			m.nack(s, w, false)
		}
	default: // no row, or it definitely failed
		if m.late(s, w, i) {
			return
		}
		if !m.mut(LedgerNoPending) {
			id.Ledger, id.Owner = pending, int8(w)
		}
		m.ask(s, w, i)
	}
}

// late: past the business deadline the ledger makes no new call
// (effects.ErrPastDeadline); the decider drops its claim and the run
// again finds no decision, and no call that took effect: expired.
func (m *Model) late(s *State, w, i int) bool {
	if !s.Late || m.b.Plain {
		return false
	}
	m.reach(gLedgerLate)
	id := &s.ID[i]
	if id.Ledger.touched() {
		id.Ledger = failed // reconciled: it did not
	}
	m.unclaim(s, w, i)
	s.Worker[w].Phase = run
	return true
}

// ask sends the request right after the pending row commits (a crash
// between the two is a crash after a request lost on the way).
func (m *Model) ask(s *State, w, i int) {
	m.checkAsk(s, i, int(s.Worker[w].Msg))
	id := &s.ID[i]
	id.Sent = s.Worker[w].Msg
	id.Asks = min(id.Asks+1, 2)
	id.Credit = max(id.Credit, 1) - 1
	id.InFlight++
	s.Worker[w].Phase = await
}

// record writes the remote side's answer to the ledger.
func (m *Model) record(s *State, w, i int) {
	id := &s.ID[i]
	a := s.Worker[w].Answer
	if a == answerRedirect && m.mut(RedirectFollowed) {
		a = answerOK
	}
	switch a {
	case answerOK:
		// The ledger row and then the decision: a crash between the two
		// leaves a succeeded row, which the next attempt takes as the
		// decision (the ledger step's first case), so they are one step.
		if id.Status == expired && id.Claim == claimLive+claimState(w) {
			s.fail(vExpiredUnderCall, i, -1)
		}
		id.Ledger, id.Decided, id.DecFor = succeeded, true, s.Worker[w].Msg
		m.unclaim(s, w, i)
		s.Worker[w].Phase = run
	case answerPermanent:
		id.Ledger = failed
		id.credit() // answered: it did not happen
		if id.Claim != claimLive+claimState(w) {
			m.reach(gRecordClaimLost)
			m.nack(s, w, false) // its claim was taken over: the new owner decides
			return
		}
		m.unclaim(s, w, i)
		m.deadLetter(s, w)
	default:
		id.Ledger = failed
		id.credit()
		m.failAttempt(s, w, i)
	}
}

// failAttempt ends a failed attempt: counted while the worker holds the
// decision's claim; a decider whose claim was taken over (its heartbeat
// was late) waits instead, for the new owner decides now.
func (m *Model) failAttempt(s *State, w, i int) {
	held := s.ID[i].Claim == claimLive+claimState(w)
	if !held {
		m.reach(gTimeoutClaimLost)
	}
	m.unclaim(s, w, i)
	m.nack(s, w, held)
}

// nack ends the attempt: counted, it may exhaust the attempts and dead-
// letter the message; otherwise the copy goes back to the broker (a
// message let out of the parked table waits, ready, again). The turn
// stays.
func (m *Model) nack(s *State, w int, counted bool) {
	wk := &s.Worker[w]
	i := m.msgs[wk.Msg].id
	id := &s.ID[i]
	if counted && id.Status.final() {
		m.reach(gNackSettled)
		wk.Phase = finish // settled meanwhile: the failure is a duplicate's
		return
	}
	if counted {
		id.Attempts++
		if int(id.Attempts) >= m.b.MaxAttempts {
			m.deadLetter(s, w)
			return
		}
	}
	if m.mut(TurnEndsOnNack) {
		id.Turn = false
	}
	if wk.Copy >= 0 && s.Copy[wk.Copy] == leasedTo(w) {
		s.Copy[wk.Copy] = queued
	}
	*wk = worker{}
}

// deadLetter moves the message to the DLQ and blocks its key.
func (m *Model) deadLetter(s *State, w int) {
	wk := &s.Worker[w]
	msg := m.msgs[wk.Msg]
	id := &s.ID[msg.id]
	wk.Phase = finish
	if id.Status.final() {
		m.reach(gDeadLetterSettled)
		return // settled meanwhile: the failure is a duplicate's
	}
	id.Status, id.Hash, id.Turn = dead, wk.Msg, false
	if m.b.DeadLetterRelease && msg.key >= 0 {
		// OnDeadLetter=release: the key moves on; were it the key's next
		// version, the gap is recorded; its successors are unparked.
		key := &s.Key[msg.key]
		if msg.ver > 0 && (key.Ver == 0 || msg.ver == int(key.Ver)+1) {
			m.skipTo(s, msg.key, msg.ver)
			id.Overtaken = true
		}
		m.unpark(s, msg.key)
		return
	}
	for k := range m.keys {
		if (k == msg.key || m.mut(PoisonBlocksAllKeys)) && s.Key[k].Blocked == 0 {
			s.Key[k].Blocked = blockedBy(msg.id)
		}
	}
}

// ack acknowledges the worker's copy, if it still holds its lease.
func (m *Model) ack(s *State, w int) {
	c := s.Worker[w].Copy
	if c < 0 || s.Copy[c] != leasedTo(w) {
		return
	}
	m.checkAck(s, int(s.Worker[w].Msg))
	s.Copy[c] = acked
}

// unclaim drops worker w's claim on identity i.
func (m *Model) unclaim(s *State, w, i int) {
	if s.ID[i].Claim == claimLive+claimState(w) {
		s.ID[i].Claim = unclaimed
	}
}

// crash kills worker w: its memory goes, its leases orphan, its claim
// and its ledger row lose their heartbeat. The database stays.
func (m *Model) crash(s *State, w int) {
	s.Crashes--
	for c := range m.copies {
		if s.Copy[c] == leasedTo(w) {
			s.Copy[c] = orphan
		}
	}
	for i := range m.ids {
		if s.ID[i].Claim == claimLive+claimState(w) {
			s.ID[i].Claim = claimDead
		}
		if s.ID[i].Ledger == pending && int(s.ID[i].Owner) == w {
			s.ID[i].Ledger = pendingDead
		}
	}
	s.Worker[w] = worker{}
}
