package seqboxtype

import "time"

// Identity names the message a Decider or Handler is working on: the
// inbox identity (consumer, source, id). Libraries that keep per-message
// state outside the inbox (the effects ledger) key it by this.
type Identity struct {
	// Consumer is the consumer's Config.Name: independent consumers of one
	// event each have an identity of their own.
	Consumer string
	// Source is the event's source attribute.
	Source string
	// ID is the event's id attribute.
	ID string
	// InTransaction is true while the inbox transaction is open: in a
	// Handler, and in a Decider run inside it (a message let out of
	// the parked table without a recorded decision). Work that must
	// commit on its own (a ledger row before an external call) cannot
	// run there: on SQLite the open transaction holds the only writer.
	InTransaction bool
	// Deadline is the event's business deadline (its time plus the
	// consumer's MaxAge; zero: none), in a Decider's context. Past it the
	// effects ledger makes no new call for the identity: it only resolves
	// a call made before it (docs/design.md §10.1).
	Deadline time.Time
}
