package model

import (
	"fmt"
	"sort"
)

// Mutant is a known way to break the protocol. The checker must find a
// counterexample for each; they live in this package only, never in the
// library.
type Mutant string

// The mutants. The first six are the classic ways to break an inbox; the
// rest are the bugs the agent path shipped with (docs/design.md, "The
// agent path") and the timing rules that fixed them.
const (
	AckBeforeCommit           Mutant = "ack-before-commit"
	NoInboxInsert             Mutant = "no-inbox-insert"
	GateSkipped               Mutant = "gate-skipped"
	TurnEndsOnNack            Mutant = "turn-ends-on-nack"
	DecideBeforeSemanticCheck Mutant = "decide-before-semantic-check"
	LedgerNoPending           Mutant = "ledger-no-pending"
	DecideBeforeGate          Mutant = "decide-before-gate"
	TurnNotDurable            Mutant = "turn-not-durable"
	ClaimOutlivesProcess      Mutant = "claim-outlives-process"
	PendingWithoutLease       Mutant = "pending-without-lease"
	BusinessKeyNotReserved    Mutant = "business-key-not-reserved"
	UncertainUnderLiveCall    Mutant = "uncertain-under-live-call"
	RedirectFollowed          Mutant = "redirect-followed"
	ReconcileTooEarly         Mutant = "reconcile-too-early"
	HoldWithoutDeadline       Mutant = "hold-without-deadline"
	PoisonBlocksAllKeys       Mutant = "poison-blocks-all-keys"
	// Issue 36: the classes the model's abstractions hid, and the holes
	// in what it compared.
	BusinessKeyCheckUnlocked Mutant = "business-key-check-unlocked"
	DecisionNotBound         Mutant = "decision-not-bound"
	TurnNotBound             Mutant = "turn-not-bound"
	TurnWithoutWayOut        Mutant = "turn-without-way-out"
	StaleCheckSkipped        Mutant = "stale-check-skipped"
	SkipRecordsNoGap         Mutant = "skip-records-no-gap"
	UnparkPastTurn           Mutant = "unpark-past-turn"
	SkipWhileDeciding        Mutant = "skip-while-deciding"
	// Issue 37: a race at the business deadline.
	ExpiryUnderLiveCall Mutant = "expiry-under-live-call"
	// Issue 37: the same race, with a dead caller.
	ExpiryOverUncertainCall Mutant = "expiry-over-uncertain-call"
	// Issue 37: keys release of a turn holder let out of the parked
	// table (the bug f4cbc9e fixed).
	ReleaseKeepsParkedCopy Mutant = "release-keeps-parked-copy"
)

// mutants says what each one does.
var mutants = map[Mutant]string{
	AckBeforeCommit:           "the copy is acknowledged before the transaction commits",
	NoInboxInsert:             "the inbox row is not written, so a redelivery is not recognised",
	GateSkipped:               "the ordering gate is not consulted",
	TurnEndsOnNack:            "a transient failure (nack) ends the key's turn",
	DecideBeforeSemanticCheck: "Decide runs before the business-key check",
	LedgerNoPending:           "the ledger writes no pending row before the remote call",
	DecideBeforeGate:          "Decide runs before the ordering gate; agent path: order at the agent",
	TurnNotDurable:            "taking the turn writes nothing durable, so a crash loses it; agent path: lost after a crash",
	ClaimOutlivesProcess:      "a dead decider's claim is never taken over by heartbeat; agent path: two-minute claims",
	PendingWithoutLease:       "a dead caller's pending ledger row stays pending; agent path: lost after a crash",
	BusinessKeyNotReserved:    "a business key being decided under another identity is not waited for; agent path: business key twice",
	UncertainUnderLiveCall:    "a pending row is judged by its age, not its caller's lease: a live call is taken as abandoned, reconciled and made again",
	RedirectFollowed:          "a 3xx answer counts as success; agent path: redirects followed",
	ReconcileTooEarly:         "a reconcile's 'not applied' is trusted while a request may still be in flight",
	HoldWithoutDeadline:       "a hold never times out",
	PoisonBlocksAllKeys:       "a dead letter blocks every key, not only its own",
	BusinessKeyCheckUnlocked:  "PostgreSQL: the business-key check reads and the turn is written at the commit, with no lock between (READ COMMITTED); issue 36 class 1",
	DecisionNotBound:          "a copy with another payload uses the decision recorded for the first copy; issue 36 class 2",
	TurnNotBound:              "a copy with another payload takes the first copy's turn and is decided and dispatched; issue 36 class 3",
	TurnWithoutWayOut:         "a turn whose message never comes back is never ended (no sweep, no keys release); issue 36 class 4",
	StaleCheckSkipped:         "the ordering gate does not settle a passed version stale",
	SkipRecordsNoGap:          "a skip or release moves the key past versions without recording the gap",
	UnparkPastTurn:            "unparking lets the next parked message out while a predecessor holds the key's turn",
	SkipWhileDeciding:         "a dead letter is skipped while its redrive's decision is being asked",
	ExpiryUnderLiveCall:       "a copy past the business deadline ends its event expired while a live decider's call for it runs (neither its claim nor its ledger row is looked at)",
	ExpiryOverUncertainCall:   "past the business deadline an event ends expired, though its ledger row says a dead caller's call took effect or may have (only a live claim is looked at)",
	ReleaseKeepsParkedCopy:    "keys release ends the turn of a message let out of the parked table (before its decision, or after its call failed) and records it skipped, but leaves its parked copy, which is let out with the key's others and applied",
}

// Mutants lists every mutant's name, sorted.
func Mutants() []Mutant {
	out := make([]Mutant, 0, len(mutants))
	for m := range mutants {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Describe says what the mutant breaks.
func (m Mutant) Describe() string { return mutants[m] }

// ParseMutant returns the mutant by name ("" is the protocol itself).
func ParseMutant(name string) (Mutant, error) {
	if name == "" {
		return "", nil
	}
	if _, ok := mutants[Mutant(name)]; !ok {
		return "", fmt.Errorf("model: no mutant %q (seqbox model mutants lists them)", name)
	}
	return Mutant(name), nil
}

// Needs widens b to what the mutant needs to show itself: a business-key
// duplicate, a second key, a lost heartbeat, a refusal, a gap. The rest
// of b stays.
func (m Mutant) Needs(b Bounds) Bounds {
	switch m {
	case DecideBeforeSemanticCheck, BusinessKeyNotReserved:
		b.BusinessKey = true
	case UncertainUnderLiveCall:
		b.Resend, b.Expiries = true, max(b.Expiries, 1)
	case RedirectFollowed:
		b.Failures = max(b.Failures, 1)
	case HoldWithoutDeadline:
		b.Gap = true
	case PoisonBlocksAllKeys:
		b.Keys, b.Versions, b.BusinessKey = max(b.Keys, 2), 1, false
	case BusinessKeyCheckUnlocked:
		b.BusinessKey, b.Postgres, b.Ops = true, true, 0
	case DecisionNotBound, TurnNotBound:
		b.Collision = true
	case TurnWithoutWayOut:
		b.Losses = max(b.Losses, 1)
	case StaleCheckSkipped, SkipRecordsNoGap:
		b = PoisonMidBounds()
	case SkipWhileDeciding:
		b = PoisonMidBounds()
		b.Ops = 2
	case ExpiryUnderLiveCall, ExpiryOverUncertainCall:
		b = DeadlineBounds()
	case ReleaseKeepsParkedCopy:
		b = ReleasedHolderBounds()

	}
	return b
}
