package chaos

import (
	"context"
	"fmt"
	"time"

	pubsubtr "github.com/seqbox/seqbox/transport/pubsub"
)

// pubsubProject is the project of a scenario's topics and subscriptions:
// the in-process emulator (internal/broker/pubsub) accepts any.
const pubsubProject = "seqbox"

// PubsubFake is what the harness needs of an in-process Pub/Sub emulator
// beyond a client's calls: no Pub/Sub API counts a subscription's
// unacknowledged messages.
type PubsubFake interface {
	// Publish puts body on topic (a topic path, projects/P/topics/T)
	// byte for byte, as a foreign producer would.
	Publish(topic string, body []byte)
	// Unacked counts topic's messages that nobody acknowledged.
	Unacked(topic string) int
}

// PubsubBroker is the Broker of the Pub/Sub emulator at addr (host:port,
// as PUBSUB_EMULATOR_HOST) that the harness sees into through fake.
func PubsubBroker(addr string, fake PubsubFake) Broker {
	return &pubsubBroker{addr: addr, fake: fake}
}

// pubsubBroker is a Pub/Sub emulator: a topic, an ordered subscription
// and a dead-letter topic per scenario.
type pubsubBroker struct {
	addr string
	fake PubsubFake
	n    int
}

func (b *pubsubBroker) open(ctx context.Context, lease time.Duration) (queue, error) {
	b.n++
	cfg := pubsubWorkerConfig(b.addr, fmt.Sprintf("chaos-%d", b.n), lease)
	if err := pubsubtr.Setup(ctx, cfg); err != nil {
		return nil, err
	}
	pub, err := pubsubtr.NewPublisher(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &pubsubQueue{pub: pub, fake: b.fake, cfg: cfg}, nil
}

// Close holds nothing: each queue closes its publisher.
func (b *pubsubBroker) Close() error { return nil }

// pubsubWorkerConfig is the Pub/Sub configuration of a scenario: its own
// topic, ordered subscription and dead-letter topic on the emulator, the
// ack deadline the lease, dead-lettering after seqbox's own retries.
func pubsubWorkerConfig(addr, name string, lease time.Duration) pubsubtr.Config {
	return pubsubtr.Config{Project: pubsubProject, Topic: name, Subscription: name + "-sub",
		DeadLetterTopic: name + "-dead", MaxDeliveryAttempts: 100, RetryMaxAttempts: 30,
		AckDeadline: lease, Endpoint: addr}
}

type pubsubQueue struct {
	pub  *pubsubtr.Publisher
	fake PubsubFake
	cfg  pubsubtr.Config
}

// PublishBatch publishes the valid events through the publisher and the
// invalid ones raw into the emulator.
func (q *pubsubQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(_ context.Context, body []byte) error {
		q.fake.Publish(q.topicPath(), body)
		return nil
	})
}

func (q *pubsubQueue) topicPath() string {
	return "projects/" + q.cfg.Project + "/topics/" + q.cfg.Topic
}

// Pending counts the scenario's messages the emulator has no ack for.
func (q *pubsubQueue) Pending(context.Context) (int, error) {
	return q.fake.Unacked(q.topicPath()), nil
}

func (q *pubsubQueue) Args() []string {
	return []string{"--transport", "pubsub", "--broker", q.cfg.Endpoint, "--topic", q.cfg.Topic}
}

func (q *pubsubQueue) Close() error { return q.pub.Close() }
