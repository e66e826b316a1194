package store

import (
	"context"
	"database/sql"
	"time"
)

// Control is where consumers register themselves and where operator
// requests wait for the consumer that owns the handler (DESIGN §4). The CLI
// and the admin API write requests; only the owning consumer executes them.
type Control interface {
	// ConsumerRegister records (or refreshes) a consumer's registration: its
	// policies, handler kind and heartbeat. The last writer wins.
	ConsumerRegister(ctx context.Context, r Registration) error
	// ConsumerRegisterTx is Register inside a transaction the caller opened on
	// the pool (SQLite has one writer: the pool would wait for it).
	ConsumerRegisterTx(ctx context.Context, tx *sql.Tx, r Registration) error
	// ConsumerHeartbeat moves a registered consumer's heartbeat to at.
	ConsumerHeartbeat(ctx context.Context, consumer string, at time.Time) error
	// ConsumerList lists every registered consumer, by name.
	ConsumerList(ctx context.Context) ([]Registration, error)
	// ConsumerGet reads one consumer's registration; ErrNotFound when it
	// never registered.
	ConsumerGet(ctx context.Context, consumer string) (Registration, error)

	// RequestInsert records an operator request in state RequestPending and
	// returns its sequence number.
	RequestInsert(ctx context.Context, r OperatorRequest) (int64, error)
	// RequestListPending lists a consumer's pending requests, oldest first.
	RequestListPending(ctx context.Context, consumer string) ([]OperatorRequest, error)
	// RequestGet reads one request by its sequence number.
	RequestGet(ctx context.Context, seq int64) (OperatorRequest, error)
	// RequestClaim moves a pending request to RequestRunning for taker;
	// false means it was no longer pending (taken or cancelled).
	RequestClaim(ctx context.Context, seq int64, taker string, at time.Time) (bool, error)
	// RequestFinish records a running request's result: state RequestDone
	// or RequestFailed, the decisions it produced (JSON) and the error.
	RequestFinish(ctx context.Context, seq int64, state RequestState, result []byte, errText string, at time.Time) error
	// RequestCancel moves a pending request to RequestCancelled; false
	// means a consumer took it first.
	RequestCancel(ctx context.Context, seq int64, why string, at time.Time) (bool, error)
}

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

// RequestState is where an operator request stands.
type RequestState string

// The states of an operator request.
const (
	// RequestPending: recorded, waiting for the owning consumer.
	RequestPending RequestState = "pending"
	// RequestRunning: a consumer process took it and is executing it.
	RequestRunning RequestState = "running"
	// RequestDone: executed; Result holds the decisions.
	RequestDone RequestState = "done"
	// RequestFailed: the consumer refused or could not execute it; Error
	// says why.
	RequestFailed RequestState = "failed"
	// RequestCancelled: nobody took it in time and the requester withdrew
	// it.
	RequestCancelled RequestState = "cancelled"
)

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
	Seq      int64
	Consumer string
	// Action is ActionRedrive, ActionSkip or ActionRelease.
	Action string
	// Target is the DLQ sequence number (redrive, skip) or the key
	// (release).
	Target      string
	RequestedBy string
	Reason      string
	RequestedAt time.Time
	State       RequestState
	// TakenBy names the consumer process that took the request.
	TakenBy string
	TakenAt time.Time
	// Result is the JSON of the decisions the action produced.
	Result []byte
	// Error is why a failed or cancelled request did not run.
	Error  string
	DoneAt time.Time
}
