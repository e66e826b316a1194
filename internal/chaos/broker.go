package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Transports are the transports a chaos run can consume from.
var Transports = []string{"embedded", "nats", "kafka", "sqs", "pubsub"}

// Broker is a running broker that a chaos run's scenarios consume from,
// each through a stream, topic or queue of its own. Dial reaches one that
// runs already; seqbox-lab starts one in process (a BrokerStarter).
type Broker interface {
	// open creates a fresh queue for the next scenario.
	open(ctx context.Context, lease time.Duration) (queue, error)
	// Close releases what the harness holds on the broker, and stops a
	// broker it started.
	Close() error
}

// BrokerStarter starts the broker of transport for one chaos run.
type BrokerStarter func(transport string) (Broker, error)

// NodeKiller is a Broker that can stop one of its nodes for a while and
// start it again (the broker-node-kill scenario): one whose nodes run in
// the harness's process.
type NodeKiller interface {
	Broker
	// KillNode stops one node for down, starts it again, and logs what
	// it did with log.
	KillNode(down time.Duration, log func(format string, args ...any))
}

// Reporter is a Broker with something to tell after each scenario, for
// the progress log.
type Reporter interface {
	Broker
	// Report is one line on the broker's state.
	Report() string
}

// Endpoint is where a running broker listens.
type Endpoint struct {
	// Transport is nats, kafka or sqs.
	Transport string
	// Addr is the broker's address as a worker's --broker takes it: a
	// nats:// URL, Kafka seed brokers host:port joined by commas, or an
	// SQS endpoint URL (spoken to with the AWS Query protocol and static
	// credentials, as goaws and SQS accept).
	Addr string
	// Replicas is the replication factor of a scenario's NATS stream.
	// Default: 3 (at most the servers known) when the server is in a
	// cluster, else 1.
	Replicas int
	// Run sets this run's streams, topics and queues apart from other
	// runs' on the same broker: they are named chaos<Run><n>. Empty for a
	// broker of the run's own.
	Run string
}

// errNoPubsubCount says why Dial refuses Pub/Sub.
var errNoPubsubCount = errors.New("pubsub --broker: Pub/Sub has no call that counts a subscription's unacknowledged messages, " +
	"which the harness needs to tell when a phase has drained: run seqbox-lab chaos --transport pubsub, which counts them in its emulator")

// Dial connects to the running broker at e and checks that it answers.
func Dial(ctx context.Context, e Endpoint) (Broker, error) {
	if e.Addr == "" {
		return nil, fmt.Errorf("%s: no broker address", e.Transport)
	}
	switch e.Transport {
	case "nats":
		return dialNATS(e)
	case "kafka":
		return dialKafka(ctx, e)
	case "sqs":
		return dialSQS(ctx, e)
	case "pubsub":
		return nil, errNoPubsubCount
	}
	return nil, fmt.Errorf("--transport %q: not a broker transport (%s)", e.Transport, strings.Join(Transports[1:], ", "))
}

// runTag is a fresh Endpoint.Run: random hex and a hyphen.
func runTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "-"
}

// CheckBroker says whether opt names a broker as its transport needs:
// none for the embedded transport, else an address or a way to start one.
func (opt Options) CheckBroker() error {
	switch {
	case opt.Transport == "embedded" || opt.Transport == "":
		if opt.BrokerAddr != "" {
			return fmt.Errorf("--broker: the embedded transport has no broker")
		}
	case opt.Transport == "pubsub" && opt.BrokerAddr != "":
		return fmt.Errorf("--transport %w", errNoPubsubCount)
	case opt.BrokerAddr == "" && opt.StartBroker == nil:
		return fmt.Errorf("--transport %s needs a running broker: pass --broker with its address, "+
			"or run seqbox-lab chaos, which starts one in process", opt.Transport)
	}
	return nil
}

// broker returns the run's broker: none for the embedded transport, the
// one at opt.BrokerAddr, or one opt.StartBroker starts.
func broker(ctx context.Context, opt Options) (Broker, error) {
	if err := opt.CheckBroker(); err != nil {
		return nil, err
	}
	switch {
	case opt.Transport == "embedded":
		return nil, nil
	case opt.BrokerAddr != "":
		return Dial(ctx, Endpoint{Transport: opt.Transport, Addr: opt.BrokerAddr, Run: runTag()})
	}
	return opt.StartBroker(opt.Transport)
}
