package pubsub

import (
	"context"
	"fmt"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Setup creates what seqbox expects on Pub/Sub, leaving what already
// exists as it is: the topic; the dead-letter topic with a subscription of
// the same ID, so that dead-lettered messages are kept; and the
// subscription, with message ordering (unless Unordered), the ack
// deadline, the dead-letter policy, exactly-once delivery when asked and
// no retry policy (seqbox's Nack delay is the only backoff).
//
// On Google Cloud the Pub/Sub service agent also needs the publisher role
// on the dead-letter topic and the subscriber role on the subscription,
// or dead-lettering silently does not happen; Setup does not grant them.
func Setup(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults("Topic", "Subscription")
	if err != nil {
		return err
	}
	c, err := ps.NewClient(ctx, cfg.Project, cfg.clientOptions()...)
	if err != nil {
		return fmt.Errorf("pubsub: setup: %w", err)
	}
	defer c.Close()
	topic := topicName(cfg.Project, cfg.Topic)
	dlt := topicName(cfg.Project, cfg.DeadLetterTopic)
	for _, name := range []string{topic, dlt} {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); exists(err) != nil {
			return fmt.Errorf("pubsub: setup: create topic %s: %w", name, err)
		}
	}
	subs := []*pubsubpb.Subscription{{
		Name:  subscriptionName(cfg.Project, cfg.DeadLetterTopic),
		Topic: dlt,
	}, {
		Name:                      subscriptionName(cfg.Project, cfg.Subscription),
		Topic:                     topic,
		AckDeadlineSeconds:        int32(cfg.AckDeadline.Seconds()),
		EnableMessageOrdering:     !cfg.Unordered,
		EnableExactlyOnceDelivery: cfg.ExactlyOnce,
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{
			DeadLetterTopic:     dlt,
			MaxDeliveryAttempts: int32(cfg.MaxDeliveryAttempts),
		},
	}}
	for _, s := range subs {
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, s); exists(err) != nil {
			return fmt.Errorf("pubsub: setup: create subscription %s: %w", s.Name, err)
		}
	}
	return nil
}

// exists turns AlreadyExists into success.
func exists(err error) error {
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	return err
}

func topicName(project, id string) string { return "projects/" + project + "/topics/" + id }

func subscriptionName(project, id string) string {
	return "projects/" + project + "/subscriptions/" + id
}
