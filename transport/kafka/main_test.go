package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	brokerkafka "github.com/seqbox/seqbox/internal/broker/kafka"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/transport/kafka"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the Kafka transport's broker suite") {
		return
	}
	goleak.VerifyTestMain(m)
}

// rig is one in-process cluster with one fresh topic.
type rig struct {
	srv   *brokerkafka.Server
	topic string
}

var topics atomic.Int64

// newRig starts a cluster for the test and creates a topic of partitions.
func newRig(t testing.TB, partitions int32) *rig {
	t.Helper()
	srv, err := brokerkafka.Start(brokerkafka.Config{})
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(srv.Close)
	topic := fmt.Sprintf("events-%d", topics.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.CreateTopic(ctx, topic, partitions); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return &rig{srv: srv, topic: topic}
}

// config is a member configuration with short timeouts for tests.
func (r *rig) config(group string) kafka.Config {
	return kafka.Config{
		Brokers: r.srv.Addrs(), Topic: r.topic, Group: group,
		SessionTimeout: 3 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		RebalanceTimeout: 10 * time.Second, Wait: 100 * time.Millisecond,
	}
}

// open joins group; the member is closed when the test ends.
func (r *rig) open(t testing.TB, group string) *kafka.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := kafka.Open(ctx, r.config(group))
	if err != nil {
		t.Fatalf("open member: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// publisher returns a publisher closed when the test ends.
func (r *rig) publisher(t testing.TB) *kafka.Publisher {
	t.Helper()
	p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: r.srv.Addrs(), Topic: r.topic})
	if err != nil {
		t.Fatalf("new publisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
