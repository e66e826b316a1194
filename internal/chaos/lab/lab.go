// Package lab starts the brokers of a chaos run in process, on loopback:
// a three-node NATS cluster with JetStream, kfake, goaws and pstest (see
// internal/broker). seqbox-lab links it; seqbox does not, and runs chaos
// over a broker transport only against a running broker (chaos.Dial).
package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
)

// Start starts transport's broker in process and returns it as the chaos
// run's broker; Close stops it. It is a chaos.BrokerStarter.
func Start(transport string) (chaos.Broker, error) {
	switch transport {
	case "nats":
		return startNATS()
	case "kafka":
		return startKafka()
	case "sqs":
		return startSQS()
	case "pubsub":
		return startPubsub()
	}
	return nil, fmt.Errorf("--transport %q: not a broker transport (%s)", transport, strings.Join(chaos.Transports[1:], ", "))
}

// dial reaches a broker Start started.
func dial(transport, addr string, replicas int) (chaos.Broker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return chaos.Dial(ctx, chaos.Endpoint{Transport: transport, Addr: addr, Replicas: replicas})
}

// stopping is a broker the run started: Close stops it too.
type stopping struct {
	chaos.Broker
	stop func() error
}

// Close releases the harness's hold on the broker, then stops it.
func (b stopping) Close() error {
	err := b.Broker.Close()
	if serr := b.stop(); err == nil {
		err = serr
	}
	return err
}
