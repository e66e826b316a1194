package store

import "time"

// OutboxEvent is one event of the outbox: emitted by a handler in its
// transaction, published by the relay after commit (package outbox).
type OutboxEvent struct {
	// Seq is its place in the outbox (set by OutboxInsert).
	Seq int64
	// Origin names the consumer that emitted it ("" outside one).
	Origin string
	// PartitionKey orders the events: one key's are published in Seq
	// order.
	PartitionKey string
	// EventID is the event's id attribute.
	EventID string
	// Body is the structured-mode CloudEvent.
	Body []byte
	// CreatedAt is when it was emitted.
	CreatedAt time.Time
	// Attempts counts the publisher's refusals so far.
	Attempts int
}

// OutboxListReadyParams are Executor.OutboxListReady's.
type OutboxListReadyParams struct {
	// Now: a refused event whose next attempt is after Now holds up its
	// key.
	Now time.Time
	// Limit bounds the events listed.
	Limit int
}

// OutboxMarkPublishedParams are Executor.OutboxMarkPublished's.
type OutboxMarkPublishedParams struct {
	// Seqs are the events published, by Seq.
	Seqs []int64
	// At is the time they are marked published.
	At time.Time
}

// OutboxPruneParams are Executor.OutboxPrune's.
type OutboxPruneParams struct {
	// Before: events published before it go.
	Before time.Time
	// Limit is the most events removed (at least 1).
	Limit int
}

// OutboxRefusalRecordParams are Executor.OutboxRefusalRecord's.
type OutboxRefusalRecordParams struct {
	// Seq names the refused event.
	Seq int64
	// Error is why the publisher refused it.
	Error string
	// NextAttempt is when it is tried again.
	NextAttempt time.Time
}

// OutboxLeaseParams are Executor.OutboxLeaseTake's and
// OutboxLeaseRelease's: the relay lease Name, held by Owner.
type OutboxLeaseParams struct {
	// Name is the lease's name (the relay's Config.Name); Owner names the
	// relay that holds or takes it.
	Name, Owner string
	// Now: a lease that expired before Now is free (OutboxLeaseTake).
	Now time.Time
	// Until is when the lease taken or renewed runs out (OutboxLeaseTake).
	Until time.Time
}

// OutboxBacklog is what the outbox holds unpublished
// (Executor.OutboxBacklog).
type OutboxBacklog struct {
	// Pending counts the unpublished events.
	Pending int
	// Oldest is when the oldest of them was emitted (zero when none).
	Oldest time.Time
	// RefusedKeys counts the keys of unpublished events the publisher
	// refused.
	RefusedKeys int
	// MaxAttempts is the most refusals of one unpublished event (0 when
	// none was refused).
	MaxAttempts int
}

// OutboxRefusal is a partition key held up by an event the publisher
// refused: the key's oldest unpublished event (Executor.OutboxRefusalList).
type OutboxRefusal struct {
	// PartitionKey is the key held up.
	PartitionKey string
	// EventID is the refused event's id.
	EventID string
	// Seq is its place in the outbox.
	Seq int64
	// Attempts counts the publisher's refusals of it so far.
	Attempts int
	// LastError is the latest refusal's error.
	LastError string
	// Unpublished counts the key's unpublished events, this one included.
	Unpublished int
	// Since is when the event was emitted; NextAttempt when it is tried
	// again.
	Since, NextAttempt time.Time
}
