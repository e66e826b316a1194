package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/broker/sqsclient"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/seqbox/seqbox/transport/kafka"
	natstr "github.com/seqbox/seqbox/transport/nats"
	sqstr "github.com/seqbox/seqbox/transport/sqs"
)

// openTransport opens the transport a worker consumes from.
func openTransport(ctx context.Context, opt WorkerOptions) (transport.Transport, error) {
	switch opt.Transport {
	case "", "embedded":
		return embedded.Open(ctx, opt.DB, embedded.Config{Name: opt.Queue, Lease: opt.Lease})
	case "nats":
		return natstr.Open(ctx, natsWorkerConfig(opt.Broker, opt.Topic, opt.Lease))
	case "sqs":
		return sqstr.Open(ctx, sqstr.Config{Client: sqsclient.Client(opt.Broker), QueueURL: opt.Topic, MaxAttempts: 30})
	case "kafka":
		return kafka.Open(ctx, kafka.Config{Brokers: strings.Split(opt.Broker, ","), Topic: opt.Topic,
			Group: kafkaGroup(opt.Topic), SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
			// A member SIGKILLed while the group rebalances holds the
			// rebalance until RebalanceTimeout (Kafka's default, a
			// minute), which outlasted a restarted member's JoinTimeout:
			// it gave up and exited (1 run in ~10 under CI load). The
			// transport never blocks in a rebalance, so a short one is
			// safe; the join then waits longer than any rebalance can.
			RebalanceTimeout: 3 * time.Second, JoinTimeout: time.Minute})
	}
	if open, ok := opt.Transports[opt.Transport]; ok {
		return open(ctx, opt)
	}
	if opt.Transport == "pubsub" {
		return nil, fmt.Errorf("chaos worker: --transport pubsub: this binary does not link the Pub/Sub client; run seqbox-lab")
	}
	return nil, fmt.Errorf("chaos worker: --transport %q: not one of %s", opt.Transport, strings.Join(Transports, ", "))
}
