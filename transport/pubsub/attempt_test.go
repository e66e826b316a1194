package pubsub_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	broker "github.com/seqbox/seqbox/internal/broker/pubsub"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/pubsub"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// receiveOne waits for one delivery.
func receiveOne(t *testing.T, tr transport.Transport) transport.Delivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := tr.Receive(context.Background(), 1)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(ds) == 1 {
			return ds[0]
		}
	}
	t.Fatal("nothing received within 30s")
	return nil
}

// TestAttemptWithoutDeadLetterPolicy: without a dead-letter policy
// Pub/Sub does not count deliveries, so a member counts its own: a
// redelivery to the same member is attempt 2, but one to another member
// starts again at 1 (the conformance suite would need NoAttemptCount for
// such a subscription). With the policy, another member sees Pub/Sub's
// count.
func TestAttemptWithoutDeadLetterPolicy(t *testing.T) {
	srv := startBroker(t)
	cfg := fresh(t, srv, nil)
	// A second subscription on the same topic, created without a
	// dead-letter policy (Setup always sets one).
	c, err := ps.NewClient(context.Background(), broker.Project, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bare := cfg
	bare.Subscription = cfg.Subscription + "-bare"
	if _, err := c.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{
		Name:  fmt.Sprintf("projects/%s/subscriptions/%s", cfg.Project, bare.Subscription),
		Topic: fmt.Sprintf("projects/%s/topics/%s", cfg.Project, cfg.Topic), AckDeadlineSeconds: 2,
	}); err != nil {
		t.Fatal(err)
	}
	if err := publisher(t, cfg).Publish(context.Background(), transporttest.Event("k", 1)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg          pubsub.Config
		brokerCounts bool
		otherMember  int
	}{{cfg, true, 3}, {bare, false, 1}} {
		// The subscription with the policy goes first: pstest counts a
		// message's deliveries over all subscriptions of its topic.
		a, b := open(t, tc.cfg), open(t, tc.cfg)
		if a.BrokerCountsAttempts() != tc.brokerCounts {
			t.Fatalf("%s: BrokerCountsAttempts %v", tc.cfg.Subscription, a.BrokerCountsAttempts())
		}
		for want := 1; want <= 2; want++ {
			d := receiveOne(t, a)
			if d.Attempt() != want {
				t.Fatalf("%s: same member, delivery %d reports attempt %d", tc.cfg.Subscription, want, d.Attempt())
			}
			if err := d.Nack(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
		}
		d := receiveOne(t, b)
		if d.Attempt() != tc.otherMember {
			t.Fatalf("%s: other member's third delivery reports attempt %d, want %d", tc.cfg.Subscription, d.Attempt(), tc.otherMember)
		}
		if err := d.Ack(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
