package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/seqbox/seqbox/transport"
	pubsubtr "github.com/seqbox/seqbox/transport/pubsub"
)

// WorkerTransports are the transports seqbox-lab's chaos workers open
// beyond the harness's own (cli.Edition.WorkerTransports): the Pub/Sub
// client is linked by seqbox-lab only, and the operator binary does not
// download it.
var WorkerTransports = map[string]chaos.WorkerTransport{
	"pubsub": func(ctx context.Context, opt chaos.WorkerOptions) (transport.Transport, error) {
		return pubsubtr.Open(ctx, pubsubWorkerConfig(opt.Broker, opt.Topic, opt.Lease))
	},
}

// pubsubProject is the emulator project the chaos topics live in.
const pubsubProject = "seqbox"

// pubsubBroker gives each scenario a topic and subscription of its own on
// the emulator at addr; f counts what is unacknowledged.
func pubsubBroker(addr string, f fake) chaos.Broker {
	n := 0
	return chaos.BrokerOf(func(ctx context.Context, lease time.Duration) (chaos.Queue, error) {
		n++
		cfg := pubsubWorkerConfig(addr, fmt.Sprintf("chaos-%d", n), lease)
		if err := pubsubtr.Setup(ctx, cfg); err != nil {
			return nil, err
		}
		pub, err := pubsubtr.NewPublisher(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return &pubsubQueue{pub: pub, fake: f, cfg: cfg}, nil
	}, nil)
}

// pubsubWorkerConfig is the transport configuration of scenario topic
// name: the harness's and the workers' alike.
func pubsubWorkerConfig(addr, name string, lease time.Duration) pubsubtr.Config {
	return pubsubtr.Config{Project: pubsubProject, Topic: name, Subscription: name + "-sub",
		DeadLetterTopic: name + "-dead", MaxDeliveryAttempts: 100, RetryMaxAttempts: 30,
		AckDeadline: lease, Endpoint: addr}
}

// pubsubQueue is one scenario's topic.
type pubsubQueue struct {
	pub  *pubsubtr.Publisher
	fake fake
	cfg  pubsubtr.Config
}

// PublishBatch publishes the valid events through the publisher and the
// invalid ones straight into the emulator.
func (q *pubsubQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return chaos.PublishRuns(ctx, bodies, q.pub.PublishBatch, func(_ context.Context, body []byte) error {
		q.fake.Publish(q.topicPath(), body)
		return nil
	})
}

func (q *pubsubQueue) topicPath() string {
	return "projects/" + q.cfg.Project + "/topics/" + q.cfg.Topic
}

// Pending counts the topic's unacknowledged messages in the emulator.
func (q *pubsubQueue) Pending(context.Context) (int, error) {
	return q.fake.Unacked(q.topicPath()), nil
}

// Args are the worker flags that reach the topic.
func (q *pubsubQueue) Args() []string {
	return []string{"--transport", "pubsub", "--broker", q.cfg.Endpoint, "--topic", q.cfg.Topic}
}

// Close closes the publisher.
func (q *pubsubQueue) Close() error { return q.pub.Close() }
