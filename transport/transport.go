// Package transport defines how seqbox receives messages: a Transport hands
// out batches of Deliveries, and each Delivery carries the whole
// acknowledgement vocabulary. The consumer acknowledges only after its
// database transaction commits.
package transport

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ErrLeaseLost is returned by Ack, Nack and Extend when the delivery's lease
// expired and the message may already be with another consumer. The inbox
// makes that harmless; the error says the broker copy was not settled.
var ErrLeaseLost = errors.New("transport: lease lost")

// ErrClosed is returned by a transport after Close.
var ErrClosed = errors.New("transport: closed")

// Delivery is one delivery of one message.
type Delivery interface {
	// Body is the message exactly as published.
	Body() []byte
	// Attempt is 1 on the first delivery and grows with every redelivery.
	Attempt() int
	// Ack settles the message: it will not be delivered again.
	Ack(ctx context.Context) error
	// Nack returns the message for redelivery after delay.
	Nack(ctx context.Context, delay time.Duration) error
	// Extend pushes the lease (visibility timeout) d into the future, for
	// handlers that run long.
	Extend(ctx context.Context, d time.Duration) error
}

// Header names of the W3C trace context on a broker message: the
// publishers write the event's traceparent and tracestate there too, as
// OpenTelemetry's messaging instrumentations do, and the consumer reads
// them from there for an envelope that carries none.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// HeaderCarrier is implemented by deliveries whose broker message carries
// headers beside the body: NATS headers, Kafka record headers, SQS
// message attributes, Pub/Sub attributes. The consumer reads the W3C
// trace context (traceparent, tracestate) there for an envelope that
// carries none of its own.
type HeaderCarrier interface {
	// Header returns the named header's value, "" when absent. Names are
	// matched as the broker matches them (case-insensitively for NATS).
	Header(name string) string
}

// PublishTimer is implemented by deliveries whose broker records when
// the message was published: the embedded queue, NATS JetStream, Kafka,
// SQS and Pub/Sub. The consumer's lag metrics read it for an envelope
// without a publishedat attribute.
type PublishTimer interface {
	// PublishedAt is when the broker took the message (zero when it does
	// not say).
	PublishedAt() time.Time
}

// Transport receives deliveries.
type Transport interface {
	// Receive returns up to max deliveries, waiting a short while when none
	// are ready; an empty batch is not an error.
	Receive(ctx context.Context, max int) ([]Delivery, error)
	// Close stops the transport.
	Close() error
}

// BatchAcker is implemented by transports that settle many deliveries in one
// round trip. The consumer uses it after each commit when available.
type BatchAcker interface {
	// AckBatch acknowledges every delivery; deliveries whose lease was lost
	// are reported with ErrLeaseLost, the others are settled.
	AckBatch(ctx context.Context, ds []Delivery) error
}

// BatchExtender is implemented by transports that extend many leases in
// one round trip. The consumer's lease keeper uses it when available: it
// extends every delivery it holds each Config.ExtendEvery, and one
// extension per delivery is a write each (on the embedded queue, a
// commit and its flush each), thousands of them under a backlog.
type BatchExtender interface {
	// ExtendBatch pushes the lease of every delivery by; deliveries whose
	// lease was lost are reported with ErrLeaseLost, the others are
	// extended.
	ExtendBatch(ctx context.Context, ds []Delivery, by time.Duration) error
}

// Execer runs a statement; *sql.Tx is one.
type Execer interface {
	// ExecContext runs query with args, as *sql.Tx's ExecContext does.
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// TxAcker is a transport whose acknowledgements are rows of a database
// (the embedded queue). When the consumer's store keeps its tables in the
// same database, the consumer deletes them inside the batch's own
// transaction: the queue, the inbox and the effects commit together, in
// one fsync, and no window is left between COMMIT and ACK.
type TxAcker interface {
	// Location names the database the acknowledgements live in (for
	// SQLite, the file's absolute path); empty when it cannot be told.
	Location() string
	// AckIn acknowledges ds through exec, a transaction on that database.
	// Deliveries whose lease was lost are left alone.
	AckIn(ctx context.Context, exec Execer, ds []Delivery) error
}

// TxAckCommitter is a TxAcker told when a transaction it acknowledged in
// has committed: the embedded queue then wakes its idle receivers, as a
// group's next message became ready with that commit (on PostgreSQL a
// receiver woken by AckIn itself looks before the commit, sees nothing,
// and waits for its next poll).
type TxAckCommitter interface {
	TxAcker
	// AckCommitted says that the acknowledgements AckIn made of ds
	// have committed.
	AckCommitted(ds []Delivery)
}

// NextTaker is a transport whose message groups hand out their messages
// one at a time (the embedded queue's groups): while a group's head is
// leased, no receiver gets the message after it. The holder of the head
// can take that next one before it acknowledges the head, so that the
// transaction that ends the head starts the next one (a consumer with
// Decide takes the next message's turn in it).
type NextTaker interface {
	// TakeNext leases, for each of heads that still holds its lease and
	// belongs to a group, the message after it in its group when that
	// one is ready, to the caller. A head without a group, or whose
	// next message is not ready (none, leased, or waiting out a nack),
	// takes nothing. The messages taken come back in publication order.
	TakeNext(ctx context.Context, heads []Delivery) ([]Delivery, error)
}

// Publisher puts messages on a transport.
type Publisher interface {
	// Publish puts one message on the transport, body as its bytes (a
	// structured-mode CloudEvent), and returns once the transport has
	// stored it.
	Publish(ctx context.Context, body []byte) error
}
