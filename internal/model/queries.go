package model

// The queries the pipeline makes of the database.

// bkApplied: another identity applied business key b.
func (s *State) bkApplied(m *Model, b, i int) bool {
	for j := range m.ids {
		if j != i && m.msgs[j].bk == b && s.ID[j].Status == applied {
			return true
		}
	}
	return false
}

// bkUncertain: another identity of business key b settled without
// applying (dead-lettered, skipped, stale) although its call took effect
// or may have.
func (s *State) bkUncertain(m *Model, b, i int) bool {
	for j := range m.ids {
		o := &s.ID[j]
		if j != i && m.msgs[j].bk == b && o.Status.final() && o.Status != applied && o.Ledger.touched() {
			return true
		}
	}
	return false
}

// bkInFlight: another identity holding a turn for business key b has not
// settled, and goes first: it made a call that took effect or may have (a
// redriven one) while i made none, or else it took its turn before i.
func (s *State) bkInFlight(m *Model, b, i int) bool {
	me := &s.ID[i]
	for j := range m.ids {
		o := &s.ID[j]
		earlier := !me.Turn || o.TurnSeq < me.TurnSeq
		if j != i && m.msgs[j].bk == b && o.Turn && !o.Status.final() &&
			((!me.Ledger.touched() && (o.Ledger.touched() || earlier)) || (me.Ledger.touched() && o.Ledger.touched() && earlier)) {
			return true
		}
	}
	return false
}

// turnElsewhere: another identity of key k holds its turn.
func (s *State) turnElsewhere(m *Model, k, i int) bool {
	for j := range m.ids {
		if j != i && m.msgs[j].key == k && s.ID[j].Turn && !s.ID[j].Status.final() {
			return true
		}
	}
	return false
}

// turnHeld: some identity of key k holds its turn.
func (s *State) turnHeld(m *Model, k int) bool { return s.turnElsewhere(m, k, -1) }

// nextParked is key k's first held message: the lowest version, or the
// earliest parked when unversioned; -1 when none.
func (s *State) nextParked(m *Model, k int) int {
	best := -1
	for j := range m.ids {
		if m.msgs[j].key != k || s.ID[j].Status != held {
			continue
		}
		if best < 0 || s.order(m, j) < s.order(m, best) {
			best = j
		}
	}
	return best
}

// order is a parked identity's place in its key's line.
func (s *State) order(m *Model, j int) int {
	if v := m.msgs[s.ID[j].Hash].ver; v > 0 {
		return v
	}
	return int(s.ID[j].ParkSeq)
}

// nextParkSeq numbers a message parked on key k after those parked there.
func (s *State) nextParkSeq(m *Model, k int) uint8 {
	var seq uint8
	for j := range m.ids {
		if m.msgs[j].key == k && s.ID[j].Status.parked() {
			seq = max(seq, s.ID[j].ParkSeq)
		}
	}
	return seq + 1
}
