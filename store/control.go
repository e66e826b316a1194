package store

import (
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// HandlerRecord is the handler kind of seqbox's built-in record handler
// (replay, demo): the only kind the CLI may drive in-process.
const HandlerRecord = "record"

// HandlerApplication is the handler kind of every consumer built with its
// own handler.
const HandlerApplication = "application"

// Registration is what a consumer says about itself in the database.
type Registration struct {
	// Consumer is the consumer's name.
	Consumer string
	// HandlerKind is HandlerApplication or HandlerRecord.
	HandlerKind string
	// Policies is the consumer's ordering and retry policy, as JSON.
	Policies []byte
	// Process names the process that registered last (host:pid).
	Process string
	// StartedAt is when that process registered.
	StartedAt time.Time
	// HeartbeatAt is the last sign of life of a running consumer (zero for
	// one that only delivered and never ran).
	HeartbeatAt time.Time
}

// The actions an operator may request.
const (
	// ActionRedrive sends DLQ message Target back through the pipeline.
	ActionRedrive = "redrive"
	// ActionSkip resolves DLQ message Target without applying it.
	ActionSkip = "skip"
	// ActionRelease unblocks key Target, blocked by a version gap.
	ActionRelease = "release"
)

// OperatorRequest is one action an operator asked the owning consumer to
// execute, with who asked, why, and what came of it.
type OperatorRequest struct {
	// Seq is the request's sequence number (RequestInsert returns it).
	Seq int64
	// Consumer is the consumer the request is for: only it executes it.
	Consumer string
	// Action is ActionRedrive, ActionSkip or ActionRelease.
	Action string
	// Target is the DLQ sequence number (redrive, skip) or the key
	// (release).
	Target string
	// RequestedBy is who asked; a skip or a release records it as who
	// decided.
	RequestedBy string
	// Reason is why, as the operator gave it; a skip or a release records
	// it as its why.
	Reason string
	// RequestedAt is when the request was recorded.
	RequestedAt time.Time
	// State is where the request stands: pending, running, done, failed or
	// cancelled.
	State seqboxtype.Request
	// TakenBy names the consumer process that took the request.
	TakenBy string
	// TakenAt is when it was taken (zero until then).
	TakenAt time.Time
	// AliveAt is the taker's last sign of life while it runs the request
	// (RequestClaim sets it, its heartbeat renews it: RequestAlive); a
	// request whose taker fell silent is failed (RequestAbandon). Zero
	// for a request taken by a seqbox that kept none.
	AliveAt time.Time
	// Result is the JSON of the results the action produced.
	Result []byte
	// Error is why a failed or cancelled request did not run.
	Error string
	// DoneAt is when it finished or was cancelled (zero until then).
	DoneAt time.Time
}
