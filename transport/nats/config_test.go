package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	natstr "github.com/seqbox/seqbox/transport/nats"
)

// TestConfigValidate: the defaults are valid, and each mistake is refused
// with an error naming its field, by Open and NewPublisher before any
// connection is made.
func TestConfigValidate(t *testing.T) {
	if err := (natstr.Config{}).Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if err := (natstr.Config{MaxAttempts: 3, MaxDeliver: natstr.MaxDeliverFor(3)}).Validate(); err != nil {
		t.Fatalf("MaxDeliver = MaxDeliverFor(MaxAttempts) refused: %v", err)
	}
	cases := []struct {
		field string
		cfg   natstr.Config
	}{
		{"Stream", natstr.Config{Stream: "a.b"}},
		{"Durable", natstr.Config{Durable: "x y"}},
		{"Subject", natstr.Config{Subject: "events.*"}},
		{"Subject", natstr.Config{Subject: "events."}},
		{"Partitions", natstr.Config{Partitions: -1}},
		{"Replicas", natstr.Config{Replicas: 7}},
		{"AckWait", natstr.Config{AckWait: -time.Second}},
		{"Wait", natstr.Config{AckWait: time.Second, Wait: 2 * time.Second}},
		{"MaxAge", natstr.Config{MaxAge: time.Minute}},
		{"MaxDeliver", natstr.Config{MaxDeliver: -2}},
		{"MaxDeliver", natstr.Config{MaxDeliver: 5}},
		{"MaxDeliver", natstr.Config{MaxAttempts: 3, MaxDeliver: natstr.MaxDeliverFor(3) - 1}},
		{"MaxAckPending", natstr.Config{MaxAckPending: -1}},
		{"MaxAttempts", natstr.Config{MaxAttempts: -1}},
	}
	for _, c := range cases {
		// The URL points nowhere: a connection attempt would fail with
		// another error.
		c.cfg.URL = "nats://127.0.0.1:1"
		for what, err := range map[string]error{
			"Validate": c.cfg.Validate(),
			"Open":     openErr(c.cfg),
			"Publish":  publisherErr(c.cfg),
		} {
			var ce *natstr.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(err.Error(), "Config."+c.field) {
				t.Errorf("%s(%+v) = %v, want a ConfigError naming %s", what, c.cfg, err, c.field)
			}
		}
	}
}

// TestOpenRefusesForeignStream: an existing stream that does not cover the
// partition subjects is refused, naming Subject, and left as it was.
func TestOpenRefusesForeignStream(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 2*time.Second)
	other := cfg
	other.Subject = "elsewhere"
	publisherT(t, other) // creates the stream on elsewhere.*
	_, err := natstr.Open(context.Background(), cfg)
	var ce *natstr.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Subject" {
		t.Fatalf("open on a stream covering other subjects: %v, want a ConfigError naming Subject", err)
	}
}

func openErr(cfg natstr.Config) error {
	tr, err := natstr.Open(context.Background(), cfg)
	if err == nil {
		tr.Close()
	}
	return err
}

func publisherErr(cfg natstr.Config) error {
	p, err := natstr.NewPublisher(context.Background(), cfg)
	if err == nil {
		p.Close()
	}
	return err
}
