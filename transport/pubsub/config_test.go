package pubsub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport/pubsub"
)

// TestConfigValidation: wrong values are refused with an error naming the
// field, before any network call.
func TestConfigValidation(t *testing.T) {
	ok := pubsub.Config{Project: "p", Topic: "t", Subscription: "s", Endpoint: "127.0.0.1:1"}
	for _, tc := range []struct {
		field  string
		change func(*pubsub.Config)
	}{
		{"Project", func(c *pubsub.Config) { c.Project = "" }},
		{"Subscription", func(c *pubsub.Config) { c.Subscription = "" }},
		{"MaxDeliveryAttempts", func(c *pubsub.Config) { c.MaxDeliveryAttempts = 4 }},
		{"MaxDeliveryAttempts", func(c *pubsub.Config) { c.MaxDeliveryAttempts = 101 }},
		{"MaxDeliveryAttempts", func(c *pubsub.Config) { c.MaxDeliveryAttempts, c.RetryMaxAttempts = 10, 10 }},
		{"AckDeadline", func(c *pubsub.Config) { c.AckDeadline = 1500 * time.Millisecond }},
		{"AckDeadline", func(c *pubsub.Config) { c.AckDeadline = 601 * time.Second }},
		{"Wait", func(c *pubsub.Config) { c.Wait = -time.Second }},
	} {
		cfg := ok
		tc.change(&cfg)
		_, err := pubsub.Open(context.Background(), cfg)
		if !errors.Is(err, pubsub.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: open: %v, want an invalid-config error naming it", tc.field, err)
		}
	}
	cfg := ok
	cfg.Topic = ""
	if _, err := pubsub.NewPublisher(context.Background(), cfg); !errors.Is(err, pubsub.ErrInvalidConfig) || !strings.Contains(err.Error(), "Topic") {
		t.Errorf("publisher without a topic: %v", err)
	}
}

// TestOpenRefusesEarlyDeadLetter: Open reads the subscription and refuses
// one whose dead-letter policy would act before seqbox's retries end.
func TestOpenRefusesEarlyDeadLetter(t *testing.T) {
	srv := startBroker(t)
	cfg := fresh(t, srv, func(c *pubsub.Config) { c.MaxDeliveryAttempts, c.RetryMaxAttempts = 5, 4 })
	cfg.RetryMaxAttempts, cfg.MaxDeliveryAttempts = 5, 0
	if _, err := pubsub.Open(context.Background(), cfg); !errors.Is(err, pubsub.ErrInvalidConfig) || !strings.Contains(err.Error(), "RetryMaxAttempts") {
		t.Fatalf("open with Retry.MaxAttempts 5 on MaxDeliveryAttempts 5: %v", err)
	}
	cfg.RetryMaxAttempts = 4
	tr, err := pubsub.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open with Retry.MaxAttempts 4: %v", err)
	}
	_ = tr.Close()
	if _, err := pubsub.Open(context.Background(), pubsub.Config{Project: cfg.Project, Endpoint: cfg.Endpoint, Subscription: "missing"}); err == nil {
		t.Fatal("opened a subscription that does not exist")
	}
}
