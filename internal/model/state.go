package model

// State is one global state: the broker's copies, the database (which a
// crash keeps), the remote side, the workers' memories (which a crash
// loses), the fault budgets, and ghost counters that only the invariants
// read. It is a value: a step copies it.
type State struct {
	Copy   [maxCopies]copyState
	ID     [maxMsgs]identity
	Key    [maxKeys]keyState
	Worker [maxWorkers]worker
	// Collided marks a message recorded as a collision (by message).
	Collided [maxMsgs]bool
	// Fault budgets left.
	Crashes, Expiries, Failures, Ops, Losses uint8
	// Late: the business deadline (MaxAge) passed for every event
	// (Bounds.Deadline).
	Late bool
	// Violation is the invariant a step broke (0: none).
	Violation violation
}

// copyState is where one broker copy is.
type copyState uint8

const (
	queued copyState = iota // available to any receiver
	orphan                  // leased to a worker that died: back when the lease runs out
	acked                   // gone for good
	lost                    // dropped by the broker: never redelivered
	leased                  // leased + w: leased to live worker w
)

func leasedTo(w int) copyState { return leased + copyState(w) }

// status is what the database says about an identity.
type status uint8

const (
	none    status = iota // nothing recorded (a turn row may exist)
	held                  // parked: waiting for its turn or a missing version
	blocked               // parked behind a blocked key
	ready                 // let out of the parked table, to be decided and run
	applied               // final
	stale                 // final
	semDup                // final: its business key applied under another identity
	dead                  // final until redriven: in the DLQ
	skipped               // final: skipped by an operator
	expired               // final: past its business deadline (MaxAge), undecided
)

func (s status) final() bool { return s >= applied }
func (s status) parked() bool {
	return s == held || s == blocked || s == ready
}

// claimState is a decision claim's row.
type claimState uint8

const (
	unclaimed claimState = iota
	claimDead            // its owner died; taken over once its heartbeat is three beats old
	claimLive            // claimLive + w: worker w holds it and its heartbeat runs
)

// ledgerState is the effect ledger's row for the identity's call.
type ledgerState uint8

const (
	noRow          ledgerState = iota
	pending                    // a live caller is calling (its lease is renewed)
	pendingDead                // the caller died; its lease runs out
	uncertainFresh             // outcome unknown; a request may still be in flight
	uncertainOld               // outcome unknown; older than the call timeout
	succeeded
	failed // the remote side answered that it did not apply it
)

// unresolved: nobody knows yet whether the call took effect.
func (l ledgerState) unresolved() bool { return l >= pending && l <= uncertainOld }

// touched: the call took effect, or may have.
func (l ledgerState) touched() bool { return l.unresolved() || l == succeeded }

// identity is one (consumer, source, id) as the database, the remote side
// and the ghosts see it.
type identity struct {
	Status status
	// Turn: a seqbox_retries row holds its key's turn and reserves its
	// business key. TurnSeq orders turns (earlier turns win a business key).
	Turn     bool
	TurnSeq  uint8
	Attempts uint8
	// Hash is the message whose payload the inbox or parked row recorded.
	Hash    int8
	ParkSeq uint8 // arrival order among a key's parked messages
	// TurnMsg is the message (payload) the turn row is bound to, while
	// Turn holds; DecFor the one the recorded decision was made for.
	TurnMsg int8
	Decided bool
	DecFor  int8
	Claim   claimState
	Ledger  ledgerState
	Owner   int8 // the ledger row's live caller
	// The remote side: requests in flight, effects it applied.
	InFlight, Remote uint8
	// Ghosts: effects applied, times the agent was asked (both capped at
	// 2: more is a violation already), asks still allowed (one, plus one
	// per call that failed or was lost and recorded, or redrive; capped at
	// 3), passed its gate, overtaken by a recorded gap decision.
	Effects, Asks, Credit uint8
	Passed, Overtaken     bool
	// Released is a ghost: its turn was ended for good (an operator's
	// keys release, or the sweep) and it was recorded skipped (its dead
	// letter says so).
	Released bool
	// Sent is a ghost: the message whose payload the agent received under
	// this identity (-1: none yet).
	Sent int8
}

// credit allows one more ask: a call failed or was lost, and that was
// recorded, or the identity was redriven.
func (id *identity) credit() { id.Credit = min(id.Credit+1, 3) }

// keyState is a partition key's row, and its ghosts.
type keyState struct {
	Ver int8 // 0: no version committed yet (the first takes the baseline)
	// Blocked: 0 free, 1 blocked by its hold's expiry, 2+i blocked by
	// dead-lettered identity i.
	Blocked int8
	Gaps    uint16 // versions a recorded gap decision passed over
	// LastApplied is a ghost: the last version applied.
	LastApplied int8
}

const blockedByHold = 1

func blockedBy(i int) int8 { return int8(2 + i) }

// phase is where a worker is in a delivery.
type phase uint8

const (
	idle     phase = iota
	ackEarly       // mutant ack-before-commit: acks first
	run            // runs the pipeline's transaction
	reserve        // PostgreSQL: the business key was read free; the turn is written at the commit
	claim          // takes the decision claim
	ledger         // reads and writes the ledger row, and sends the request
	await          // waits for the answer
	record         // records the answer in the ledger (and the decision)
	finish         // acks the copy
)

// answer is what the remote side told a waiting worker.
type answer uint8

const (
	noAnswer answer = iota
	answerOK
	answerFail
	answerPermanent
	answerRedirect
)

// worker is one process's memory of its current delivery.
type worker struct {
	Phase  phase
	Copy   int8 // the broker copy; -1: a message let out of the parked table
	Msg    int8
	Answer answer
	// Seq is the place among turns a reserve phase will write (read
	// when the business key was checked).
	Seq uint8
}

// busyOn reports whether a live worker is working on identity i.
func (s *State) busyOn(m *Model, i int) bool {
	for w := range m.workers {
		if s.Worker[w].Phase != idle && m.msgs[s.Worker[w].Msg].id == i {
			return true
		}
	}
	return false
}
