package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/seqbox/seqbox/transport/kafka"
	natstr "github.com/seqbox/seqbox/transport/nats"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkabroker "github.com/seqbox/seqbox/internal/broker/kafka"
	natsbroker "github.com/seqbox/seqbox/internal/broker/nats"
	pubsubbroker "github.com/seqbox/seqbox/internal/broker/pubsub"
	sqsbroker "github.com/seqbox/seqbox/internal/broker/sqs"
	pubsubtr "github.com/seqbox/seqbox/transport/pubsub"
	sqstr "github.com/seqbox/seqbox/transport/sqs"
)

// Transports are the transports a chaos run can consume from.
var Transports = []string{"embedded", "nats", "kafka", "sqs", "pubsub"}

// queue is where one scenario's messages wait: the embedded queue in the
// scenario's database, or a topic on a broker the harness runs in process
// on loopback.
type queue interface {
	PublishBatch(ctx context.Context, bodies [][]byte) error
	// Pending counts the messages not yet acknowledged: waiting or in
	// flight.
	Pending(ctx context.Context) (int, error)
	// Args are the worker flags that reach the queue.
	Args() []string
	Close() error
}

// describer is a queue that can say why messages stay pending, for the
// post-mortem of a phase that stalls.
type describer interface {
	Describe(ctx context.Context) string
}

// brokers are the brokers of one chaos run, started once and shared by
// its scenarios (each on a topic of its own).
type brokers struct {
	kind   string
	nats   *natsbroker.Cluster
	kafka  *kafkabroker.Server
	pubsub *pubsubbroker.Server
	sqs    *sqsbroker.Server
	n      int
}

// startBrokers starts what kind needs.
func startBrokers(kind string) (*brokers, error) {
	b := &brokers{kind: kind}
	var err error
	switch kind {
	case "embedded":
	case "nats":
		// Three nodes, so a scenario can kill one and JetStream keeps a
		// quorum.
		if b.nats, err = natsbroker.StartCluster(3, ""); err == nil {
			err = b.nats.WaitReady(30 * time.Second)
		}
	case "kafka":
		b.kafka, err = kafkabroker.Start(kafkabroker.Config{Partitions: 8})
	case "pubsub":
		b.pubsub, err = pubsubbroker.Start(0)
	case "sqs":
		b.sqs, err = sqsbroker.Start(sqsbroker.Options{})
	default:
		err = fmt.Errorf("--transport %q: not one of %s", kind, strings.Join(Transports, ", "))
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close stops the brokers.
func (b *brokers) Close() {
	if b.nats != nil {
		_ = b.nats.Close()
	}
	if b.kafka != nil {
		b.kafka.Close()
	}
	if b.pubsub != nil {
		_ = b.pubsub.Close()
	}
	if b.sqs != nil {
		_ = b.sqs.Close()
	}
}

// open returns a fresh queue for one scenario whose database is db.
func (b *brokers) open(ctx context.Context, db string, lease time.Duration) (queue, error) {
	b.n++
	switch b.kind {
	case "nats":
		cfg := natsWorkerConfig(b.nats.URL(), fmt.Sprintf("chaos%d", b.n), lease)
		pub, err := natstr.NewPublisher(ctx, cfg)
		if err != nil {
			return nil, err
		}
		nc, err := nats.Connect(cfg.URL, nats.MaxReconnects(-1))
		if err != nil {
			_ = pub.Close()
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			_ = pub.Close()
			return nil, err
		}
		return &natsQueue{pub: pub, nc: nc, js: js, cfg: cfg}, nil
	case "kafka":
		topic := fmt.Sprintf("chaos-%d", b.n)
		if err := b.kafka.CreateTopic(ctx, topic, 0); err != nil {
			return nil, err
		}
		pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: b.kafka.Addrs(), Topic: topic})
		if err != nil {
			return nil, err
		}
		adm, err := kgo.NewClient(kgo.SeedBrokers(b.kafka.Addrs()...))
		if err != nil {
			_ = pub.Close()
			return nil, err
		}
		return &kafkaQueue{pub: pub, raw: adm, adm: kadm.NewClient(adm), brokers: b.kafka.Addrs(), topic: topic}, nil
	case "pubsub":
		cfg := pubsubWorkerConfig(b.pubsub.Addr, fmt.Sprintf("chaos-%d", b.n), lease)
		if err := pubsubtr.Setup(ctx, cfg); err != nil {
			return nil, err
		}
		pub, err := pubsubtr.NewPublisher(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return &pubsubQueue{pub: pub, fake: b.pubsub, cfg: cfg}, nil
	case "sqs":
		client := sqsbroker.Client(b.sqs.Endpoint())
		url, _, err := sqsbroker.CreateQueue(ctx, client, fmt.Sprintf("chaos-%d.fifo", b.n), sqsbroker.Queue{VisibilityTimeout: lease.Round(time.Second)})
		if err != nil {
			return nil, err
		}
		pub, err := sqstr.NewPublisher(client, url)
		if err != nil {
			return nil, err
		}
		return &sqsQueue{pub: pub, client: client, endpoint: b.sqs.Endpoint(), url: url}, nil
	}
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: lease})
	if err != nil {
		return nil, err
	}
	return embeddedQueue{q}, nil
}

// killNode stops one NATS node for a while and starts it again; false
// when the transport has no nodes to kill.
func (b *brokers) killNode(down time.Duration, log func(string, ...any)) bool {
	if b.nats == nil {
		return false
	}
	node := b.nats.Nodes[1]
	log("stopping NATS node %s for %s", node.Name(), down)
	node.Shutdown()
	time.Sleep(down)
	if err := node.Restart(); err != nil {
		log("restart NATS node %s: %v", node.Name(), err)
	}
	return true
}

type embeddedQueue struct{ *embedded.Queue }

func (q embeddedQueue) Pending(ctx context.Context) (int, error) {
	ready, leased, err := q.Depth(ctx)
	return ready + leased, err
}

func (embeddedQueue) Args() []string { return nil }

// natsWorkerConfig is the JetStream configuration of a scenario: its own
// stream and subjects, replicated on the cluster, AckWait the lease.
func natsWorkerConfig(url, name string, lease time.Duration) natstr.Config {
	return natstr.Config{URL: url, Stream: strings.ToUpper(name), Subject: name + ".events", Replicas: 3,
		AckWait: lease, MaxAttempts: 30}
}

type natsQueue struct {
	pub *natstr.Publisher
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg natstr.Config
}

func (q *natsQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(ctx context.Context, body []byte) error {
		_, err := q.js.Publish(ctx, q.cfg.Subject+".0", body)
		return err
	})
}

func (q *natsQueue) Pending(ctx context.Context) (int, error) {
	durable := q.cfg.Durable
	if durable == "" {
		durable = "seqbox"
	}
	c, err := q.js.Consumer(ctx, q.cfg.Stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return -1, nil // no worker has joined yet
	}
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

func (q *natsQueue) Args() []string {
	return []string{"--transport", "nats", "--broker", q.cfg.URL, "--topic", strings.TrimSuffix(q.cfg.Subject, ".events")}
}

func (q *natsQueue) Close() error {
	q.nc.Close()
	return q.pub.Close()
}

type kafkaQueue struct {
	pub     *kafka.Publisher
	raw     *kgo.Client
	adm     *kadm.Client
	brokers []string
	topic   string
}

func (q *kafkaQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(ctx context.Context, body []byte) error {
		return q.raw.ProduceSync(ctx, &kgo.Record{Topic: q.topic, Value: body}).FirstErr()
	})
}

// Pending is the group's lag: records after its committed offsets.
func (q *kafkaQueue) Pending(ctx context.Context) (int, error) {
	lags, err := q.adm.Lag(ctx, kafkaGroup(q.topic))
	if err != nil {
		return 0, err
	}
	total := 0
	for _, l := range lags {
		if l.Error() != nil {
			return 0, l.Error()
		}
		total += int(l.Lag.Total())
	}
	if total == 0 {
		// A group that has committed nothing has no lag yet: count the
		// topic's records instead.
		ends, err := q.adm.ListEndOffsets(ctx, q.topic)
		if err != nil {
			return 0, err
		}
		committed, err := q.adm.FetchOffsets(ctx, kafkaGroup(q.topic))
		if err != nil {
			return 0, err
		}
		ends.Each(func(o kadm.ListedOffset) {
			c, _ := committed.Lookup(o.Topic, o.Partition)
			if c.At < o.Offset {
				total += int(o.Offset - max(c.At, 0))
			}
		})
	}
	return total, nil
}

// Describe says who holds what: the group's state and members with their
// partitions, and each partition's committed offset, end and owner.
func (q *kafkaQueue) Describe(ctx context.Context) string {
	var b strings.Builder
	lags, err := q.adm.Lag(ctx, kafkaGroup(q.topic))
	if err != nil {
		return "describing the group failed: " + err.Error()
	}
	for _, l := range lags {
		fmt.Fprintf(&b, "group %s state %s", l.Group, l.State)
		for _, m := range l.Members {
			a, _ := m.Assigned.AsConsumer()
			var parts []int32
			for _, t := range a.Topics {
				parts = append(parts, t.Partitions...)
			}
			fmt.Fprintf(&b, "; member %s (%s) has %v", m.MemberID, m.ClientHost, parts)
		}
		for _, ml := range l.Lag.Sorted() {
			if ml.Lag == 0 {
				continue
			}
			owner := "nobody"
			if ml.Member != nil {
				owner = ml.Member.MemberID
			}
			fmt.Fprintf(&b, "; [%d] committed %d (%q) end %d lag %d held by %s", ml.Partition, ml.Commit.At, ml.Commit.Metadata, ml.End.Offset, ml.Lag, owner)
		}
	}
	return b.String()
}

func (q *kafkaQueue) Args() []string {
	return []string{"--transport", "kafka", "--broker", strings.Join(q.brokers, ","), "--topic", q.topic}
}

func (q *kafkaQueue) Close() error {
	q.adm.Close()
	return q.pub.Close()
}

func kafkaGroup(topic string) string { return "seqbox-" + topic }

// openTransport opens the transport a worker consumes from.
func openTransport(ctx context.Context, opt WorkerOptions) (transport.Transport, error) {
	switch opt.Transport {
	case "", "embedded":
		return embedded.Open(ctx, opt.DB, embedded.Config{Name: opt.Queue, Lease: opt.Lease})
	case "nats":
		return natstr.Open(ctx, natsWorkerConfig(opt.Broker, opt.Topic, opt.Lease))
	case "pubsub":
		return pubsubtr.Open(ctx, pubsubWorkerConfig(opt.Broker, opt.Topic, opt.Lease))
	case "sqs":
		return sqstr.Open(ctx, sqstr.Config{Client: sqsbroker.Client(opt.Broker), QueueURL: opt.Topic, MaxAttempts: 30})
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
	return nil, fmt.Errorf("chaos worker: --transport %q: not one of %s", opt.Transport, strings.Join(Transports, ", "))
}

// publishRuns publishes bodies in order: runs of valid events through the
// transport's publisher, and the workload's invalid ones (which a
// producer helper refuses) raw, as a foreign producer would.
func publishRuns(ctx context.Context, bodies [][]byte, batch func(context.Context, [][]byte) error,
	raw func(context.Context, []byte) error) error {
	var run [][]byte
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		err := batch(ctx, run)
		run = run[:0]
		return err
	}
	for _, b := range bodies {
		if _, err := seqboxtype.ParseEvent(b); err == nil {
			run = append(run, b)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := raw(ctx, b); err != nil {
			return err
		}
	}
	return flush()
}

// pubsubWorkerConfig is the Pub/Sub configuration of a scenario: its own
// topic, ordered subscription and dead-letter topic on the emulator, the
// ack deadline the lease, dead-lettering after seqbox's own retries.
func pubsubWorkerConfig(addr, name string, lease time.Duration) pubsubtr.Config {
	return pubsubtr.Config{Project: pubsubbroker.Project, Topic: name, Subscription: name + "-sub",
		DeadLetterTopic: name + "-dead", MaxDeliveryAttempts: 100, RetryMaxAttempts: 30,
		AckDeadline: lease, Endpoint: addr}
}

type pubsubQueue struct {
	pub  *pubsubtr.Publisher
	fake *pubsubbroker.Server
	cfg  pubsubtr.Config
}

// PublishBatch publishes the valid events through the publisher and the
// invalid ones raw into the emulator.
func (q *pubsubQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(_ context.Context, body []byte) error {
		q.fake.Fake().Publish(q.topicPath(), body, nil)
		return nil
	})
}

func (q *pubsubQueue) topicPath() string {
	return "projects/" + q.cfg.Project + "/topics/" + q.cfg.Topic
}

// Pending counts the scenario's messages the emulator has no ack for.
func (q *pubsubQueue) Pending(context.Context) (int, error) {
	n := 0
	for _, m := range q.fake.Fake().Messages() {
		if m.Topic == q.topicPath() && m.Acks == 0 {
			n++
		}
	}
	return n, nil
}

func (q *pubsubQueue) Args() []string {
	return []string{"--transport", "pubsub", "--broker", q.cfg.Endpoint, "--topic", q.cfg.Topic}
}

func (q *pubsubQueue) Close() error { return q.pub.Close() }

type sqsQueue struct {
	pub      *sqstr.Publisher
	client   *awssqs.Client
	endpoint string
	url      string
}

// PublishBatch publishes the valid events through the publisher and the
// invalid ones raw, in a group of their own.
func (q *sqsQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(ctx context.Context, body []byte) error {
		sum := sha256.Sum256(body)
		_, err := q.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q.url, MessageBody: aws.String(string(body)),
			MessageGroupId: aws.String("invalid"), MessageDeduplicationId: aws.String(hex.EncodeToString(sum[:]))})
		return err
	})
}

// Pending is what the queue holds: visible and in flight.
func (q *sqsQueue) Pending(ctx context.Context) (int, error) {
	out, err := q.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &q.url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		v, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			return 0, fmt.Errorf("sqs %s: %q", name, out.Attributes[string(name)])
		}
		n += v
	}
	return n, nil
}

func (q *sqsQueue) Args() []string {
	return []string{"--transport", "sqs", "--broker", q.endpoint, "--topic", q.url}
}

func (q *sqsQueue) Close() error { return nil }
