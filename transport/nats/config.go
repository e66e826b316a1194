package nats

import (
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config configures a Transport and a Publisher. Zero values take the
// defaults; publishers and consumers of one stream must agree on Stream,
// Subject and Partitions.
type Config struct {
	// URL is the NATS server's address, or several separated by commas
	// (the members of a cluster: the client fails over between them).
	// Default nats://127.0.0.1:4222.
	URL string
	// Options are extra connection options (credentials, TLS, a client
	// name). They apply after the transport's own: unlimited reconnects,
	// 250ms apart.
	Options []natsgo.Option

	// Stream is the JetStream stream's name. When it does not exist, Open
	// and NewPublisher create it with Replicas, Storage, DuplicateWindow
	// and MaxAge; an existing stream is used as it is, and must cover
	// Subject.*. Default "SEQBOX".
	Stream string
	// Subject is the subject prefix: an event goes to Subject.<n>, n its
	// partition (see Partition), and the stream covers Subject.*.
	// Default "seqbox.events".
	Subject string
	// Partitions is the number of partition subjects. Changing it moves
	// keys to other subjects, so change it only on an empty stream.
	// Default 16.
	Partitions int
	// Replicas is the replication factor of a stream this package
	// creates (1, or 3 or 5 in a cluster). Default 1.
	Replicas int
	// Storage is where a created stream keeps messages. Default file.
	Storage jetstream.StorageType
	// DuplicateWindow is how long the stream remembers a Nats-Msg-Id: a
	// publication with an identity seen within it is acknowledged and
	// dropped. Default 2m.
	DuplicateWindow time.Duration
	// MaxAge is how long a created stream keeps a message. seqbox's
	// RedeliveryWindow must cover it (both default to 14 days): an
	// identity forgotten by the inbox must not come back.
	MaxAge time.Duration

	// Durable is the name of the durable pull consumer every member of
	// one seqbox consumer shares. Default "seqbox".
	Durable string
	// AckWait is the lease: a delivery neither acknowledged nor extended
	// (InProgress) within it is delivered again. seqbox's ExtendEvery must
	// be well below it. Default 30s.
	AckWait time.Duration
	// MaxDeliver is the consumer's delivery limit; -1 (the default) means
	// none, and seqbox's Retry.MaxAttempts decides when a message goes to
	// seqbox's DLQ. A positive value must be at least
	// MaxDeliverFor(MaxAttempts): JetStream stops delivering a message
	// after MaxDeliver deliveries and moves past it: it never reaches
	// seqbox's DLQ.
	MaxDeliver int
	// MaxAttempts is the Retry.MaxAttempts of the seqbox consumers on
	// Durable; it is only used to check MaxDeliver. Default 5 (seqbox's
	// default).
	MaxAttempts int
	// MaxAckPending bounds the deliveries in flight across every member
	// of Durable. A seqbox consumer holds up to 2 × Workers × BatchSize;
	// below that, members wait for room. Default 10000.
	MaxAckPending int
	// Wait is how long Receive waits for a message when none is ready.
	// It must be shorter than AckWait. Default 250ms.
	Wait time.Duration
}

// Defaults of Config.
const (
	DefaultURL             = natsgo.DefaultURL
	DefaultStream          = "SEQBOX"
	DefaultSubject         = "seqbox.events"
	DefaultPartitions      = 16
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultMaxAge          = 14 * 24 * time.Hour
	DefaultDurable         = "seqbox"
	DefaultAckWait         = 30 * time.Second
	DefaultMaxAckPending   = 10000
	DefaultWait            = 250 * time.Millisecond
	defaultMaxAttempts     = 5
)

// crashLoopFactor is seqbox's own bound on deliveries that never settle:
// a message delivered more than crashLoopFactor × Retry.MaxAttempts times
// is dead-lettered on its next delivery, even when no failure could be
// recorded (every attempt crashed its process).
const crashLoopFactor = 4

// MaxDeliverFor returns the smallest JetStream MaxDeliver that leaves the
// decision to give up to seqbox, for consumers with the given
// Retry.MaxAttempts (0: seqbox's default, 5). seqbox dead-letters a
// message after maxAttempts recorded failures, or on delivery
// 4 × maxAttempts + 1 when its deliveries kept crashing the process; the
// broker must still deliver it then, or the message stops without reaching
// seqbox's DLQ.
func MaxDeliverFor(maxAttempts int) int {
	if maxAttempts <= 0 {
		maxAttempts = defaultMaxAttempts
	}
	return crashLoopFactor*maxAttempts + 1
}

// withDefaults returns c with every zero field at its default.
func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	return c
}

// Validate reports the first problem with the configuration, defaults
// applied, naming the field.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, n := range []struct {
		field string
		v     string
	}{{"Stream", c.Stream}, {"Durable", c.Durable}} {
		if strings.ContainsAny(n.v, ".*> \t\r\n/\\") {
			return invalid(n.field, "%q may not contain '.', '*', '>', '/', '\\' or white space", n.v)
		}
	}
	if err := validSubject(c.Subject); err != nil {
		return err
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"DuplicateWindow", c.DuplicateWindow}, {"MaxAge", c.MaxAge}, {"AckWait", c.AckWait}, {"Wait", c.Wait}} {
		if d.v < 0 {
			return invalid(d.field, "%s is negative", d.v)
		}
	}
	switch {
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return invalid("Partitions", "%d is outside 1..65536", c.Partitions)
	case c.Replicas < 1 || c.Replicas > 5:
		return invalid("Replicas", "%d is outside 1..5", c.Replicas)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return invalid("Storage", "unknown storage type %d", c.Storage)
	case c.MaxAge < c.DuplicateWindow:
		return invalid("MaxAge", "%s is shorter than DuplicateWindow %s", c.MaxAge, c.DuplicateWindow)
	case c.MaxAttempts < 1:
		return invalid("MaxAttempts", "%d is negative", c.MaxAttempts)
	case c.MaxDeliver < -1:
		return invalid("MaxDeliver", "%d: use -1 for no limit", c.MaxDeliver)
	case c.MaxDeliver > 0 && c.MaxDeliver < MaxDeliverFor(c.MaxAttempts):
		return invalid("MaxDeliver", "%d is below MaxDeliverFor(%d) = %d: JetStream would stop delivering a failing message before seqbox dead-letters it",
			c.MaxDeliver, c.MaxAttempts, MaxDeliverFor(c.MaxAttempts))
	case c.MaxAckPending < 1:
		return invalid("MaxAckPending", "%d is negative", c.MaxAckPending)
	case c.Wait >= c.AckWait:
		return invalid("Wait", "%s is not shorter than AckWait %s", c.Wait, c.AckWait)
	}
	return nil
}

// validSubject checks a subject prefix: dot-separated tokens, no wildcard.
func validSubject(s string) error {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return invalid("Subject", "%q is not a subject prefix: dot-separated tokens without wildcards or white space", s)
		}
	}
	return nil
}

// ConfigError is a configuration problem; Field names the Config field.
type ConfigError struct {
	// Field is the name of the Config field ("AckWait").
	Field string
	// Reason says what is wrong with its value.
	Reason string
}

// Error implements error: "nats transport: Config.<Field>: <Reason>".
func (e *ConfigError) Error() string { return "nats transport: Config." + e.Field + ": " + e.Reason }

func invalid(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
