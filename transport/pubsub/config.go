package pubsub

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Pub/Sub's own bounds on the values a Config carries.
const (
	// MinDeliveryAttempts and MaxDeliveryAttemptsLimit bound a dead-letter
	// policy's max_delivery_attempts.
	MinDeliveryAttempts      = 5
	MaxDeliveryAttemptsLimit = 100
	// MaxAckDeadline is the longest ack deadline, for a subscription and
	// for a ModifyAckDeadline call (so for Extend and Nack's delay).
	MaxAckDeadline = 600 * time.Second
	// MinSubscriptionAckDeadline is the shortest ack deadline Pub/Sub
	// accepts on a subscription (the pstest fake accepts one second).
	MinSubscriptionAckDeadline = 10 * time.Second
)

// Config configures the Pub/Sub transport: Setup, Open and NewPublisher
// each read the fields they need. Zero values take the defaults.
type Config struct {
	// Project is the Google Cloud project of the topic and the
	// subscription. Required.
	Project string
	// Topic is the topic's ID (not its full name). Required by Setup and
	// NewPublisher.
	Topic string
	// Subscription is the subscription's ID: every member opened on it
	// competes for its messages. Required by Setup and Open.
	Subscription string
	// DeadLetterTopic is the topic ID Pub/Sub forwards a message to after
	// MaxDeliveryAttempts deliveries. Setup creates it, with a
	// subscription of the same ID that keeps what lands there. Default
	// Subscription + "-dead-letter".
	DeadLetterTopic string
	// MaxDeliveryAttempts is the subscription's dead-letter policy: the
	// deliveries after which Pub/Sub gives the message to DeadLetterTopic
	// instead. Pub/Sub accepts 5 to 100. It must exceed RetryMaxAttempts
	// so that seqbox dead-letters first, into its own DLQ, with the
	// identity and the attempt history kept; Pub/Sub's dead-letter topic
	// is then only a backstop for messages seqbox never settles (a
	// consumer that crashes on them every time). Default 25: above
	// seqbox's crash-loop guard, which dead-letters a message delivered
	// more than 4 x Retry.MaxAttempts times without settling.
	MaxDeliveryAttempts int
	// RetryMaxAttempts is the seqbox consumers' Retry.MaxAttempts on this
	// subscription, checked against MaxDeliveryAttempts. Default 5, as
	// seqbox's.
	RetryMaxAttempts int
	// AckDeadline is the subscription's ack deadline (Setup): how long a
	// pulled message stays with its member unless it is extended or
	// settled. Pub/Sub accepts 10s to 600s in whole seconds; keep the
	// consumer's ExtendEvery well below it and ExtendBy at most it.
	// Default 60s.
	AckDeadline time.Duration
	// ExactlyOnce enables exactly-once delivery on the subscription
	// (Setup). Pub/Sub then does not redeliver a message whose ack
	// deadline has not expired and reports an acknowledgement that came
	// too late: Ack returns transport.ErrLeaseLost. It costs latency and
	// throughput, and seqbox's inbox does not need it. Default false.
	ExactlyOnce bool
	// Unordered creates the subscription without message ordering
	// (Setup). Default false: ordered, one ordering key per partition
	// key.
	Unordered bool
	// Wait is how long Receive waits for messages before returning an
	// empty batch. Default 1s.
	Wait time.Duration
	// Endpoint is the host:port of a Pub/Sub emulator (or pstest) to dial
	// without TLS or credentials. Empty: Google's endpoint with
	// Application Default Credentials, or PUBSUB_EMULATOR_HOST when set.
	Endpoint string
	// ClientOptions are passed to the client after those Endpoint implies.
	ClientOptions []option.ClientOption
}

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("pubsub: invalid config")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// withDefaults returns c with defaults filled in, or an error naming the
// first wrong field; need lists the ID fields the caller requires.
func (c Config) withDefaults(need ...string) (Config, error) {
	if c.DeadLetterTopic == "" && c.Subscription != "" {
		c.DeadLetterTopic = c.Subscription + "-dead-letter"
	}
	if c.MaxDeliveryAttempts == 0 {
		c.MaxDeliveryAttempts = 25
	}
	if c.RetryMaxAttempts == 0 {
		c.RetryMaxAttempts = 5
	}
	if c.AckDeadline == 0 {
		c.AckDeadline = 60 * time.Second
	}
	if c.Wait == 0 {
		c.Wait = time.Second
	}
	ids := map[string]string{"Project": c.Project, "Topic": c.Topic, "Subscription": c.Subscription}
	for _, f := range append([]string{"Project"}, need...) {
		if ids[f] == "" {
			return c, invalid(f, "is required")
		}
	}
	switch {
	case c.MaxDeliveryAttempts < MinDeliveryAttempts || c.MaxDeliveryAttempts > MaxDeliveryAttemptsLimit:
		return c, invalid("MaxDeliveryAttempts", "is %d; Pub/Sub accepts %d to %d", c.MaxDeliveryAttempts, MinDeliveryAttempts, MaxDeliveryAttemptsLimit)
	case c.RetryMaxAttempts < 0:
		return c, invalid("RetryMaxAttempts", "is %d, negative", c.RetryMaxAttempts)
	case c.MaxDeliveryAttempts <= c.RetryMaxAttempts:
		return c, invalid("MaxDeliveryAttempts", "is %d, not above RetryMaxAttempts %d: Pub/Sub would dead-letter before seqbox", c.MaxDeliveryAttempts, c.RetryMaxAttempts)
	case c.AckDeadline < time.Second || c.AckDeadline > MaxAckDeadline || c.AckDeadline%time.Second != 0:
		return c, invalid("AckDeadline", "is %s; want whole seconds up to %s (Pub/Sub's minimum is %s)", c.AckDeadline, MaxAckDeadline, MinSubscriptionAckDeadline)
	case c.Wait < 0:
		return c, invalid("Wait", "is %s, negative", c.Wait)
	}
	return c, nil
}

// clientOptions are the options NewClient gets.
func (c Config) clientOptions() []option.ClientOption {
	var opts []option.ClientOption
	if c.Endpoint != "" {
		opts = EmulatorOptions(c.Endpoint)
	}
	return append(opts, c.ClientOptions...)
}

// EmulatorOptions dial a Pub/Sub emulator (or pstest) at addr without TLS
// or credentials.
func EmulatorOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled(),
	}
}
