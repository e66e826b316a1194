package model

// Guards. Each guard the protocol encodes counts the times its condition
// held where it changes what happens, over every exploration of one
// Model. A guard nobody reaches within the bounds is not checked there:
// TestEveryGuardIsReachedWithinTheCIBounds asserts each is reached by one
// of the bounds CI runs.
type guard uint8

const (
	gInboxDuplicate          guard = iota // the inbox row says duplicate
	gInboxCollision                       // the inbox row holds another payload
	gGateBlocked                          // the key is blocked by another
	gGateStale                            // at or below the key's version
	gGateTurnElsewhere                    // another identity holds the key's turn
	gGateGap                              // a version is missing
	gBKApplied                            // its business key applied elsewhere
	gBKInFlight                           // its business key is held by an earlier turn
	gBKUncertain                          // its business key's call took effect or may have, under a settled identity
	gBKLockWait                           // PostgreSQL: the business key's lock is held by another transaction
	gTurnBound                            // the turn belongs to another copy (payload)
	gDecisionBound                        // the decision was made for another copy (payload)
	gHandlerFails                         // the handler fails after its decision, or on the plain path
	gClaimPreTaken                        // the decider finds the claim its turn's transaction took
	gClaimDecided                         // the decider finds the decision recorded
	gClaimSettled                         // the decider finds the identity settled elsewhere
	gClaimElsewhere                       // the claim is held by another decider
	gClaimBKTaken                         // the decider's second look at the business key
	gLedgerClaimLost                      // the claim was taken over before the ask
	gLedgerSucceeded                      // the ledger holds the call's success
	gLedgerLive                           // a live caller's pending row: wait
	gLedgerReconciledApplied              // an uncertain call reconciled as applied
	gLedgerReconciledNot                  // an uncertain call past the call timeout, reconciled as not applied
	gLedgerStillUncertain                 // a request may still be in flight: still uncertain
	gRecordClaimLost                      // a permanent refusal after the claim was taken over
	gTimeoutClaimLost                     // a failure after the claim was taken over is not counted
	gNackSettled                          // a counted failure of an identity settled meanwhile
	gDeadLetterSettled                    // a dead letter of an identity settled meanwhile
	gHoldTurnHeld                         // a hold does not run out over a predecessor's turn
	gSkipBeingDecided                     // skip refused: the redrive's decision is being asked
	gCallOpen                             // an operator's skip or release refused: the message's call is pending or uncertain
	gDrainTurnHeld                        // unparking waits for a predecessor's turn
	gDrainGap                             // unparking stops at a missing version
	gDrainStale                           // unparking settles a passed version stale
	gEndTurnClaimLive                     // a dead-looking turn is not ended while its decision claim is live
	gEndTurn                              // the sweep ends a turn whose message never came back
	gEndStaleTurn                         // the sweep ends a lost unkeyed turn (a business key's)
	gReleaseTurn                          // an operator ends a key's turn
	gReleaseDecided                       // an operator's release refused: the turn holder's decision is recorded
	gReleaseParkedHolder                  // an operator ends the turn of a message let out of the parked table: its parked copy goes with it
	gRedriveApplied                       // a redrive's apply unblocks its key
	gExpired                              // past the deadline, undecided and unclaimed: expired
	gExpiryUnderClaim                     // past the deadline, undecided, but a live claim: not expired
	gClaimLate                            // the decider finds the deadline passed: not asked
	gExpiryOverCall                       // past the deadline, undecided, but a call took effect or may have: not expired
	gClaimLateTouched                     // the decider finds the deadline passed and a call that may have taken effect: resolves it
	gLedgerLate                           // past the deadline the ledger makes no new call
	nGuards
)

var guardText = [nGuards]string{
	gInboxDuplicate: "inbox: duplicate", gInboxCollision: "inbox: collision", gGateBlocked: "gate: key blocked",
	gGateStale: "gate: stale", gGateTurnElsewhere: "gate: turn elsewhere", gGateGap: "gate: gap",
	gBKApplied: "business key: applied elsewhere", gBKInFlight: "business key: in flight elsewhere",
	gBKUncertain: "business key: touched by a settled identity", gBKLockWait: "business key: lock held (PostgreSQL)",
	gTurnBound: "turn: bound to another payload", gDecisionBound: "decision: made for another payload",
	gHandlerFails: "handler: fails after its decision / plain path", gClaimPreTaken: "claim: taken with the turn", gClaimDecided: "claim: already decided",
	gClaimSettled: "claim: settled elsewhere", gClaimElsewhere: "claim: held elsewhere", gClaimBKTaken: "claim: business key taken (second look)",
	gLedgerClaimLost: "ledger: claim taken over before the ask", gLedgerSucceeded: "ledger: succeeded",
	gLedgerLive: "ledger: live pending row (wait)", gLedgerReconciledApplied: "ledger: reconciled, applied",
	gLedgerReconciledNot: "ledger: reconciled, not applied", gLedgerStillUncertain: "ledger: still uncertain",
	gRecordClaimLost: "record: permanent refusal after the claim was taken over", gTimeoutClaimLost: "failure after the claim was taken over: not counted",
	gNackSettled: "nack: settled meanwhile", gDeadLetterSettled: "dead letter: settled meanwhile",
	gHoldTurnHeld: "hold: no expiry over a turn", gSkipBeingDecided: "skip: refused while being decided",
	gCallOpen:      "skip, release: refused while the call is open",
	gDrainTurnHeld: "unpark: waits for a predecessor's turn", gDrainGap: "unpark: stops at a gap", gDrainStale: "unpark: passed version stale",
	gEndTurnClaimLive: "turn end: refused while its claim is live", gEndTurn: "turn end: the sweep ends a lost message's turn",
	gEndStaleTurn: "turn end: the sweep ends a lost unkeyed turn",
	gReleaseTurn:  "turn end: an operator releases a key's turn", gRedriveApplied: "redrive: its apply unblocks the key",
	gReleaseDecided:      "turn end: release refused over a recorded decision",
	gReleaseParkedHolder: "turn end: release of a holder let out of the parked table",
	gExpired:             "deadline: expired", gExpiryUnderClaim: "deadline: not expired under a live claim", gClaimLate: "claim: past the deadline, not asked",
	gExpiryOverCall: "deadline: not expired over a call that may have taken effect", gClaimLateTouched: "claim: past the deadline, a call to resolve",
	gLedgerLate: "ledger: past the deadline, no new call",
}

func (m *Model) reach(g guard) { m.reached[g]++ }

// Reached says, per guard, how often its condition held where it decides
// what happens, over every exploration of this Model so far.
func (m *Model) Reached() map[string]int {
	out := make(map[string]int, nGuards)
	for g := range nGuards {
		out[guardText[g]] = m.reached[g]
	}
	return out
}
