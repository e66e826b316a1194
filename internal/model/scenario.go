package model

import (
	"fmt"
	"strings"
)

// Bounds are the limits of one exploration: how many keys, events and
// workers take part, and how many faults of each kind may happen. Every
// interleaving within them is explored.
type Bounds struct {
	// Keys is the number of ordered keys. The first is versioned; the
	// second, when there is one, is unversioned (arrival order); any
	// further key is versioned again.
	Keys int
	// Versions is the number of events of the first key.
	Versions int
	// Events is the number of events of every other key.
	Events int
	// Workers is the number of concurrent workers (processes).
	Workers int
	// Crashes is how many times a worker may die (SIGKILL) mid-step.
	Crashes int
	// Expiries is how many times the clock may take something from a live
	// worker: a broker lease running out during a slow step, or a claim's
	// or a ledger row's heartbeat arriving too late.
	Expiries int
	// Failures is how many times the remote side may refuse a call
	// transiently or answer with a redirect.
	Failures int
	// Ops is how many operator actions (redrive, skip, release) may happen.
	Ops int
	// MaxAttempts is the consumer's Retry.MaxAttempts.
	MaxAttempts int
	// Resend adds a producer re-send of the first event (a second copy).
	Resend bool
	// Collision adds an event reusing the first event's identity with a
	// different payload.
	Collision bool
	// BusinessKey adds an unkeyed event asking for the first event's
	// effect (its business key) under a new identity.
	BusinessKey bool
	// Gap leaves a version out of the first key: its last event skips one.
	Gap bool
	// Poison makes the last event of the last key fail permanently at the
	// remote side.
	Poison bool
	// PoisonVersion, when set, makes the first key's version PoisonVersion
	// the poison event instead (with --poison): not the key's last
	// version, so a later version applies after it and order, gaps and
	// skips have a second applied version to compare.
	PoisonVersion int
	// Postgres is the store kind: PostgreSQL under READ COMMITTED, where a
	// transaction's reads and its commit are separate steps against other
	// transactions (the business-key check reads, the turn is written at
	// the commit), serialised only by the business key's lock. Without it
	// the store is SQLite: one writer, each transaction one step.
	Postgres bool
	// Losses is how many broker copies may be lost for good (never
	// redelivered: a broker that drops one, a Deliver caller that gives up).
	Losses int
	// DeadLetterRelease is OnDeadLetter=release: a dead letter does not
	// block its key; the key moves on over it with a recorded gap.
	DeadLetterRelease bool
	// HoldAdvance is HoldExpiry=advance: an expired hold records the gap
	// and the key moves on, instead of blocking.
	HoldAdvance bool
	// GapAdvance is GapPolicy=advance: a version after a gap is not held;
	// it applies with the gap recorded.
	GapAdvance bool
	// Plain is the plain handler path: no Decide, no agent; the handler's
	// effect is in the transaction, and its failure is a retry.
	Plain bool
	// Deadline: the consumer has a business deadline (MaxAge), and the
	// clock may pass it once, for every event at once: an undecided event
	// then ends expired, unless a decider's live claim says its call may
	// be running (docs/design.md §10.1).
	Deadline bool
}

// DefaultBounds are `seqbox model check` without bound flags: one key of
// two versions, a business-key duplicate under a new identity, a poison
// event, two workers, a crash, a transient refusal and an operator
// action.
func DefaultBounds() Bounds {
	return Bounds{Keys: 1, Versions: 2, Events: 1, Workers: 2, Crashes: 1, Expiries: 0, Failures: 1, Ops: 1, MaxAttempts: 2,
		BusinessKey: true, Poison: true}
}

// SmallBounds are what CI runs (`--small`): no business key and no
// refusals, so the space is small; the tests add what each mutant needs.
func SmallBounds() Bounds {
	b := DefaultBounds()
	b.BusinessKey, b.Failures = false, 0
	return b
}

// PoisonMidBounds are CI's bounds where the poison event is not the
// versioned key's last version: three versions, the second poison, so a
// version applies after its dead letter is skipped or redriven, and
// order, gaps and skips have a second applied version to compare.
func PoisonMidBounds() Bounds {
	b := SmallBounds()
	b.Versions, b.PoisonVersion, b.Crashes = 3, 2, 0
	return b
}

// ScenarioBounds are the variants CI explores besides the CI bounds and
// the mutants' own: the plain handler path with a handler failure; a
// handler failing after its decision; PostgreSQL's store with a business
// key and every operator action; the poison event not the key's last version with a redrive to decide.
func ScenarioBounds() []Bounds {
	plain := SmallBounds()
	plain.Plain, plain.Failures = true, 1
	handler := SmallBounds()
	handler.Failures, handler.Poison = 1, false
	pg := SmallBounds()
	pg.BusinessKey, pg.Postgres, pg.Versions = true, true, 1
	release := SmallBounds()
	release.DeadLetterRelease, release.Ops = true, 2
	holdAdvance := SmallBounds()
	holdAdvance.HoldAdvance, holdAdvance.Gap, holdAdvance.Losses = true, true, 1
	gapAdvance := PoisonMidBounds()
	gapAdvance.GapAdvance, gapAdvance.Gap = true, true
	return []Bounds{plain, handler, pg, PoisonMidBounds(), release, holdAdvance, gapAdvance, DeadlineBounds()}
}

// DeadlineBounds are CI's bounds with a business deadline: the first
// event sent twice (a copy that comes back while its call runs, as after
// a lease that ran out during a slow model call), and the deadline may
// pass at any step.
func DeadlineBounds() Bounds {
	b := SmallBounds()
	b.Deadline, b.Resend = true, true
	return b
}

// ReleasedHolderBounds are CI's bounds where a key's turn may be ended by
// an operator while its holder was let out of the parked table: three
// versions, so that the second is parked behind the first, let out when
// the first applies, and the third waits behind it; one transient refusal,
// so that the second's call may fail and it waits, let out, again; one
// operator action (keys release).
func ReleasedHolderBounds() Bounds {
	b := SmallBounds()
	b.Versions, b.Failures, b.Poison, b.Crashes = 3, 1, false, 0
	return b
}

// LostBusinessKeyBounds: an unkeyed event with a business key may be
// lost by the broker while it holds its turn, and no operator acts.
func LostBusinessKeyBounds() Bounds {
	b := SmallBounds()
	b.BusinessKey, b.Losses, b.Crashes, b.Ops = true, 1, 0, 0
	return b
}

// LargeBounds are the long run (`--large`): a producer's re-send of the
// first event on top of the defaults, about four times the states. A lost
// lease, claim or ledger row of a live worker (`--expiries 1`) or a second
// key multiply the space past 25 million states; `--keys 2 --versions 1`
// and the mutants' bounds check those.
func LargeBounds() Bounds {
	b := DefaultBounds()
	b.Resend = true
	return b
}

// Limits of the state's fixed-size arrays.
const (
	maxMsgs    = 8
	maxCopies  = 10
	maxWorkers = 3
	maxKeys    = 3
)

// Validate says which bound is out of range.
func (b Bounds) Validate() error {
	for _, f := range []struct {
		name     string
		v, lo, h int
	}{{"keys", b.Keys, 1, maxKeys}, {"versions", b.Versions, 1, 4}, {"events", b.Events, 1, 4}, {"workers", b.Workers, 1, maxWorkers},
		{"crashes", b.Crashes, 0, 5}, {"expiries", b.Expiries, 0, 5}, {"failures", b.Failures, 0, 5},
		{"ops", b.Ops, 0, 5}, {"max-attempts", b.MaxAttempts, 1, 5}, {"losses", b.Losses, 0, 2},
		{"poison-version", b.PoisonVersion, 0, b.Versions}} {
		if f.v < f.lo || f.v > f.h {
			return fmt.Errorf("model: --%s %d is out of range %d..%d", f.name, f.v, f.lo, f.h)
		}
	}
	if b.Gap && b.Versions < 2 {
		return fmt.Errorf("model: --gap needs --versions of at least 2")
	}
	if n := len(b.messages()); n > maxMsgs {
		return fmt.Errorf("model: %d events is more than the model holds (%d); lower --keys or --versions", n, maxMsgs)
	}
	return nil
}

// message is one event a producer publishes: an identity with a payload.
type message struct {
	id     int // identity index; a collision shares its original's
	key    int // -1: no partition key
	ver    int // objectversion; 0: unversioned
	bk     int // business key; -1: none
	poison bool
	name   string
}

// copyOf is one copy of a message in the broker: every message has one;
// a re-send adds another.
type copyOf struct{ msg int }

// messages lists the scenario's events, in the order producers create
// them (the broker hands them out in any order).
func (b Bounds) messages() []message {
	var out []message
	for k := range b.Keys {
		versioned := k != 1
		n := b.Versions
		if k > 0 {
			n = b.Events
		}
		for v := 1; v <= n; v++ {
			ver := v
			if b.Gap && k == 0 && v == n {
				ver = v + 1 // the version before it is never published
			}
			m := message{id: len(out), key: k, bk: -1, name: fmt.Sprintf("k%d/e%d", k, v)}
			if versioned {
				m.ver = ver
				m.name = fmt.Sprintf("k%d/v%d", k, ver)
			}
			out = append(out, m)
		}
	}
	if b.BusinessKey {
		out[0].bk = 0
		out = append(out, message{id: len(out), key: -1, bk: 0, name: "bk-dup"})
	}
	switch {
	case b.Poison && b.PoisonVersion > 0:
		out[b.PoisonVersion-1].poison = true
	case b.Poison:
		out[len(out)-1-btoi(b.BusinessKey)].poison = true
	}
	if b.Collision {
		c := out[0]
		c.name += "'"
		c.poison = false
		out = append(out, c)
	}
	return out
}

// copies lists the broker's copies: one per message, and one more of the
// first event when producers re-send.
func (b Bounds) copies(msgs []message) []copyOf {
	out := make([]copyOf, 0, len(msgs)+1)
	for i := range msgs {
		out = append(out, copyOf{msg: i})
	}
	if b.Resend {
		out = append(out, copyOf{msg: 0})
	}
	return out
}

// Describe says in words what the scenario publishes.
func (b Bounds) Describe() string {
	msgs := b.messages()
	var parts []string
	for _, m := range msgs {
		s := m.name
		var tags []string
		if m.bk >= 0 {
			tags = append(tags, fmt.Sprintf("businesskey b%d", m.bk))
		}
		if m.poison {
			tags = append(tags, "poison")
		}
		if m.id != indexOf(msgs, m) {
			tags = append(tags, "same identity as "+msgs[m.id].name+", other payload")
		}
		if len(tags) > 0 {
			s += " (" + strings.Join(tags, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if b.Resend {
		parts = append(parts, msgs[0].name+" again (re-send)")
	}
	store := "store SQLite (one writer)"
	if b.Postgres {
		store = "store PostgreSQL (READ COMMITTED, business-key lock)"
	}
	parts = append(parts, store)
	if b.Losses > 0 {
		parts = append(parts, fmt.Sprintf("the broker may lose %d copy(ies)", b.Losses))
	}
	if b.Plain {
		parts = append(parts, "plain handler (no Decide)")
	}
	if b.DeadLetterRelease {
		parts = append(parts, "OnDeadLetter=release")
	}
	if b.HoldAdvance {
		parts = append(parts, "HoldExpiry=advance")
	}
	if b.GapAdvance {
		parts = append(parts, "GapPolicy=advance")
	}
	if b.Deadline {
		parts = append(parts, "MaxAge may pass")
	}
	return strings.Join(parts, "; ")
}

func indexOf(msgs []message, m message) int {
	for i := range msgs {
		if msgs[i] == m {
			return i
		}
	}
	return -1
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
