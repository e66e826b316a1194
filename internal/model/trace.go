package model

import (
	"fmt"
	"strings"
)

var statusText = [...]string{none: "nothing recorded", held: "held", blocked: "blocked", ready: "let out, to be decided",
	applied: "applied", stale: "stale", semDup: "semantic_duplicate", dead: "dead_lettered", skipped: "skipped", expired: "expired"}

var ledgerText = [...]string{noRow: "no row", pending: "pending", pendingDead: "pending (caller dead)",
	uncertainFresh: "uncertain", uncertainOld: "uncertain (past the call timeout)", succeeded: "succeeded", failed: "failed"}

var answerText = [...]string{answerOK: "applies it and answers", answerFail: "refuses it (transient)",
	answerPermanent: "refuses it for good (poison)", answerRedirect: "answers 307 redirect"}

// stepText words step st, taken from s to t, for a person.
func (m *Model) stepText(st step, s, t *State) string {
	w := fmt.Sprintf("worker %d", st.w+1)
	var name string
	if st.kind != stLeaseExpire && st.kind != stReceive && st.kind != stHoldExpire && st.kind != stRelease &&
		st.kind != stLose && st.kind != stReleaseTurn && st.kind != stSweepUnpark && st.kind != stDeadline {
		name = m.msgs[st.x].name
	}
	if wk := s.Worker[max(st.w, 0)]; st.kind >= stRun && st.kind <= stFinish && st.kind != stAnswer && st.kind != stDrop {
		name = m.msgs[wk.Msg].name
	}
	i := int(st.x)
	switch st.kind {
	case stDeadline:
		return "the business deadline (MaxAge) passes for every event"
	case stReceive:
		c := m.copies[st.x]
		return fmt.Sprintf("%s receives %s (copy %d)", w, m.msgs[c.msg].name, st.x+1)
	case stPickup:
		return fmt.Sprintf("%s takes %s, let out of the parked table", w, name)
	case stAckEarly:
		return fmt.Sprintf("%s acknowledges %s before committing anything", w, name)
	case stRun:
		return fmt.Sprintf("%s runs the pipeline for %s: %s", w, name, m.runText(s, t, int(st.w)))
	case stClaim:
		switch t.Worker[st.w].Phase {
		case ledger:
			return fmt.Sprintf("%s claims %s's decision", w, name)
		case run:
			return fmt.Sprintf("%s finds %s already decided", w, name)
		}
		return fmt.Sprintf("%s finds %s's decision claimed elsewhere and nacks it (no attempt counted)", w, name)
	case stLedger:
		asked := ""
		if t.Worker[st.w].Phase == await {
			asked = ", and asks the agent"
		}
		return fmt.Sprintf("%s reads the ledger for %s (%s): now %s%s%s", w, name, ledgerText[s.ID[i].Ledger], ledgerText[t.ID[i].Ledger], asked, m.after(t, int(st.w)))
	case stAnswer:
		to := "nobody hears it"
		if st.w >= 0 {
			to = "to " + w
		}
		return fmt.Sprintf("the agent %s for %s, %s", answerText[st.a], name, to)
	case stDrop:
		return fmt.Sprintf("the request for %s is lost on the way", name)
	case stTimeout:
		return fmt.Sprintf("%s's call for %s times out: ledger %s%s", w, name, ledgerText[t.ID[i].Ledger], m.after(t, int(st.w)))
	case stRecord:
		decided := ""
		if t.ID[i].Decided && !s.ID[i].Decided {
			decided = ", decision recorded"
		}
		return fmt.Sprintf("%s records the answer for %s: ledger %s%s%s", w, name, ledgerText[t.ID[i].Ledger], decided, m.after(t, int(st.w)))
	case stFinish:
		return fmt.Sprintf("%s acknowledges %s", w, name)
	case stHandlerFail:
		return fmt.Sprintf("%s runs the pipeline for %s: the handler fails (transient); rolled back, attempt counted, turn kept%s", w, name, m.after(t, int(st.w)))
	case stReserve:
		if t.Collided[s.Worker[st.w].Msg] && !s.Collided[s.Worker[st.w].Msg] {
			return fmt.Sprintf("%s commits %s's transaction: its turn belongs to another payload, a collision", w, name)
		}
		return fmt.Sprintf("%s commits %s's transaction: turn row written (place %d)", w, name, t.ID[i].TurnSeq)
	case stLose:
		return fmt.Sprintf("the broker loses copy %d (%s) for good", st.x+1, m.msgs[m.copies[st.x].msg].name)
	case stEndTurn:
		return fmt.Sprintf("the sweep: %s was not seen for the redelivery window and has no live claim; its turn ends (a skipped dead letter) and the hold expiry blocks its key", name)
	case stSweepUnpark:
		return fmt.Sprintf("the sweep: a hold on key k%d passes; it unparks the key", st.x)
	case stResolve:
		return fmt.Sprintf("the operator resolves %s's open call (seqbox effects resolve) as the remote side shows it: ledger %s", name, ledgerText[t.ID[st.x].Ledger])
	case stReleaseTurn:
		return fmt.Sprintf("the operator releases key k%d: the turn of its holder ends (a skipped dead letter)", st.x)
	case stCrash:
		return fmt.Sprintf("%s is killed (SIGKILL) while on %s", w, name)
	case stLeaseExpire:
		return fmt.Sprintf("the broker's lease on copy %d (%s) runs out: it is redelivered", st.x+1, m.msgs[m.copies[st.x].msg].name)
	case stClaimExpire:
		return fmt.Sprintf("the dead decider's claim on %s is three heartbeats old: it can be taken over", name)
	case stHeartbeatLoss:
		return fmt.Sprintf("the claim on %s misses its heartbeats while its decider still runs", name)
	case stLedgerLease:
		return fmt.Sprintf("the dead caller's pending ledger row for %s runs out of lease: uncertain", name)
	case stLedgerLeaseLoss:
		return fmt.Sprintf("the live caller's pending ledger row for %s misses its heartbeats: uncertain", name)
	case stLedgerAge:
		return fmt.Sprintf("the call timeout passes for %s: no request of it can still apply", name)
	case stHoldExpire:
		return fmt.Sprintf("the hold on key k%d times out: the key is blocked", st.x)
	case stRedrive:
		return fmt.Sprintf("the operator redrives %s", name)
	case stSkip:
		return fmt.Sprintf("the operator skips %s", name)
	case stRelease:
		return fmt.Sprintf("the operator releases key k%d", st.x)
	}
	return fmt.Sprintf("step %d", st.kind)
}

// runText says what a pipeline pass reached.
func (m *Model) runText(s, t *State, w int) string {
	msg := m.msgs[s.Worker[w].Msg]
	after := t.ID[msg.id]
	switch {
	case t.Collided[s.Worker[w].Msg] && !s.Collided[s.Worker[w].Msg]:
		return "collision"
	case t.Worker[w].Phase == reserve:
		return "its business key read free; its turn is written when the transaction commits"
	case t.Collided[s.Worker[w].Msg] && s.Collided[s.Worker[w].Msg]:
		return "collision again"
	case t.Worker[w].Phase == claim:
		return "its turn; stopped to be decided outside the transaction" + turnNote(s, t, msg.id)
	case after.Status != s.ID[msg.id].Status:
		return statusText[after.Status] + m.after(t, w)
	case t.Worker[w].Phase == idle:
		return "waits for its business key (nack, no attempt counted)"
	case after.Effects > s.ID[msg.id].Effects:
		return "applied again"
	}
	return "duplicate"
}

func turnNote(s, t *State, i int) string {
	if t.ID[i].Turn && !s.ID[i].Turn {
		return " (turn row written)"
	}
	return ""
}

// after says where the worker went when its step ended the attempt.
func (m *Model) after(t *State, w int) string {
	switch t.Worker[w].Phase {
	case idle:
		return "; nacked for a retry"
	case finish:
		if st := t.ID[m.msgs[t.Worker[w].Msg].id].Status; st == dead {
			return "; dead-lettered"
		}
	}
	return ""
}

// summary lists every identity's status and the keys' versions.
func (m *Model) summary(s *State) string {
	var parts []string
	for i := range m.ids {
		p := m.msgs[i].name + " " + statusText[s.ID[i].Status]
		if s.ID[i].Effects > 0 {
			p += fmt.Sprintf(" (effects %d, agent asked %d, remote applied %d)", s.ID[i].Effects, s.ID[i].Asks, s.ID[i].Remote)
		}
		parts = append(parts, p)
	}
	for k := range m.keys {
		p := fmt.Sprintf("k%d at version %d", k, s.Key[k].Ver)
		if s.Key[k].Blocked != 0 {
			p += " (blocked)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
