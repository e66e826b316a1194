package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInvalidConfig is matched by every Config and PublisherConfig
// validation error; the message names the field.
var ErrInvalidConfig = errors.New("kafka: invalid config")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Config configures a consumer-group member. Brokers, Topic and Group are
// required; zero values of the others take the defaults.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topic is the topic to consume. It must exist: create it with the
	// partition count you want (partitions bound the member parallelism
	// and keys are hashed onto them).
	Topic string
	// Group is the consumer group; every member of one seqbox consumer
	// uses the same group. Use one group per seqbox Config.Name.
	Group string
	// SessionTimeout is how long the broker waits for a silent member
	// (a killed process) before its partitions go to another member: the
	// redelivery bound after a crash. Default 45s (Kafka's default). A
	// member that closes leaves the group at once.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the member heartbeats; it also bounds
	// how soon a member notices a rebalance. Default 3s; keep it well
	// under SessionTimeout.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the broker waits for every member to
	// rejoin during a rebalance. Default 60s.
	RebalanceTimeout time.Duration
	// Wait is how long Receive waits for a record before returning an
	// empty batch. Default 250ms.
	Wait time.Duration
	// JoinTimeout bounds how long Open waits for the member's first
	// assignment. Default 30s.
	JoinTimeout time.Duration
	// CommitTimeout bounds one offset commit (an Ack, a batch ack, the
	// attempt record Receive writes before handing out records). Default
	// 10s.
	CommitTimeout time.Duration
	// Logger receives operational messages (a failed commit, a fetch
	// error). Default slog.Default().
	Logger *slog.Logger
	// ClientOptions are appended to the franz-go client options (TLS,
	// SASL, client id). Options that change group management or offset
	// commits (autocommit, balancers, rebalance callbacks) break the
	// transport's guarantees: do not pass them.
	ClientOptions []kgo.Opt
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case len(c.Brokers) == 0:
		return c, invalid("Brokers", "at least one seed broker is required")
	case c.Topic == "":
		return c, invalid("Topic", "required")
	case c.Group == "":
		return c, invalid("Group", "required")
	}
	for name, d := range map[string]time.Duration{
		"SessionTimeout": c.SessionTimeout, "HeartbeatInterval": c.HeartbeatInterval,
		"RebalanceTimeout": c.RebalanceTimeout, "Wait": c.Wait, "JoinTimeout": c.JoinTimeout,
		"CommitTimeout": c.CommitTimeout,
	} {
		if d < 0 {
			return c, invalid(name, "%s: must not be negative", d)
		}
	}
	c.SessionTimeout = orDefault(c.SessionTimeout, 45*time.Second)
	c.HeartbeatInterval = orDefault(c.HeartbeatInterval, 3*time.Second)
	c.RebalanceTimeout = orDefault(c.RebalanceTimeout, time.Minute)
	c.Wait = orDefault(c.Wait, 250*time.Millisecond)
	c.JoinTimeout = orDefault(c.JoinTimeout, 30*time.Second)
	c.CommitTimeout = orDefault(c.CommitTimeout, 10*time.Second)
	if c.HeartbeatInterval >= c.SessionTimeout {
		return c, invalid("HeartbeatInterval", "%s: must be shorter than SessionTimeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// PublisherConfig configures a Publisher. Brokers and Topic are required.
type PublisherConfig struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topic is where events are produced. It must exist.
	Topic string
	// ClientOptions are appended to the franz-go client options (TLS,
	// SASL, linger). The producer is idempotent with acks=all; options
	// that turn that off weaken the per-key order a retry keeps.
	ClientOptions []kgo.Opt
}

func (c PublisherConfig) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return invalid("Brokers", "at least one seed broker is required")
	case c.Topic == "":
		return invalid("Topic", "required")
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
