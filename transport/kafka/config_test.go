package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport/kafka"
)

// TestConfigValidation: a bad Config is refused before any connection,
// with an error that names the field.
func TestConfigValidation(t *testing.T) {
	ok := kafka.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g"}
	cases := map[string]func(*kafka.Config){
		"Brokers":           func(c *kafka.Config) { c.Brokers = nil },
		"Topic":             func(c *kafka.Config) { c.Topic = "" },
		"Group":             func(c *kafka.Config) { c.Group = "" },
		"SessionTimeout":    func(c *kafka.Config) { c.SessionTimeout = -time.Second },
		"Wait":              func(c *kafka.Config) { c.Wait = -time.Second },
		"HeartbeatInterval": func(c *kafka.Config) { c.SessionTimeout, c.HeartbeatInterval = time.Second, 2*time.Second },
	}
	for field, change := range cases {
		c := ok
		change(&c)
		_, err := kafka.Open(context.Background(), c)
		if !errors.Is(err, kafka.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want an ErrInvalidConfig naming the field", field, err)
		}
	}
	if _, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: []string{"x:1"}}); !errors.Is(err, kafka.ErrInvalidConfig) || !strings.Contains(err.Error(), "Topic") {
		t.Errorf("publisher without topic: %v", err)
	}
}

// TestOpenFailsWithoutBroker: Open gives up after JoinTimeout when no
// broker answers, and leaks nothing.
func TestOpenFailsWithoutBroker(t *testing.T) {
	_, err := kafka.Open(context.Background(), kafka.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", JoinTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "JoinTimeout") {
		t.Fatalf("open without a broker: %v", err)
	}
}
