package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox/internal/broker/kafkaadmin"
	"github.com/seqbox/seqbox/transport/kafka"
)

// kafkaPartitions is the partition count of a scenario's topic.
const kafkaPartitions = 8

// kafkaBroker is a Kafka cluster: a topic per scenario.
type kafkaBroker struct {
	addrs []string
	run   string
	n     int
}

// dialKafka checks that a seed broker of e.Addr answers.
func dialKafka(ctx context.Context, e Endpoint) (*kafkaBroker, error) {
	addrs := strings.Split(e.Addr, ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, fmt.Errorf("kafka %s: %w", e.Addr, err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		return nil, fmt.Errorf("kafka %s: %w", e.Addr, err)
	}
	return &kafkaBroker{addrs: addrs, run: e.Run}, nil
}

func (b *kafkaBroker) open(ctx context.Context, _ time.Duration) (queue, error) {
	b.n++
	topic := fmt.Sprintf("chaos-%s%d", b.run, b.n)
	if err := kafkaadmin.CreateTopic(ctx, b.addrs, topic, kafkaPartitions); err != nil {
		return nil, err
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: b.addrs, Topic: topic})
	if err != nil {
		return nil, err
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...))
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	return &kafkaQueue{pub: pub, raw: adm, adm: kadm.NewClient(adm), brokers: b.addrs, topic: topic}, nil
}

// Close holds nothing: each queue closes its clients.
func (b *kafkaBroker) Close() error { return nil }

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
