// Package kafkaadmin is the administration the Kafka tests and the chaos
// harness do on a cluster, in-process (internal/broker/kafka) or not,
// without linking kfake.
package kafkaadmin

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateTopic creates topic with partitions partitions and replication
// factor 1 on the cluster whose seed brokers are addrs. A topic that
// already exists is not an error.
func CreateTopic(ctx context.Context, addrs []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	return nil
}
