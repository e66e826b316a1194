package sqs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/transport/sqs"
)

// TestConfigValidation: a bad Config is refused with an error naming the
// field; a redrive policy that would dead-letter before seqbox is refused
// when MaxAttempts is given.
func TestConfigValidation(t *testing.T) {
	e := newEnv(t, 2*time.Second, broker.Queue{})
	ctx := context.Background()
	for _, tc := range []struct {
		cfg   sqs.Config
		field string
	}{
		{sqs.Config{QueueURL: e.url}, "Config.Client"},
		{sqs.Config{Client: e.client}, "Config.QueueURL"},
		{sqs.Config{Client: e.client, QueueURL: e.url, WaitTime: 1500 * time.Millisecond}, "Config.WaitTime"},
		{sqs.Config{Client: e.client, QueueURL: e.url, WaitTime: 21 * time.Second}, "Config.WaitTime"},
		{sqs.Config{Client: e.client, QueueURL: e.url, MaxAttempts: -1}, "Config.MaxAttempts"},
	} {
		if _, err := sqs.Open(ctx, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("open %+v: %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := sqs.Open(ctx, sqs.Config{Client: e.client, QueueURL: e.url + "-missing.fifo"}); err == nil {
		t.Error("open of a queue that does not exist succeeded")
	}

	_, dlqARN, err := broker.CreateQueue(ctx, e.client, broker.NewQueueName("dlq", true), broker.Queue{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		maxReceive, maxAttempts int
		ok                      bool
	}{{12, 3, false}, {13, 3, true}, {5, 0, true}} {
		url, _, err := broker.CreateQueue(ctx, e.client, broker.NewQueueName("redrive", true),
			broker.Queue{MaxReceiveCount: tc.maxReceive, DeadLetterQueueARN: dlqARN})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := sqs.Open(ctx, sqs.Config{Client: e.client, QueueURL: url, MaxAttempts: tc.maxAttempts})
		if tc.ok != (err == nil) {
			t.Errorf("maxReceiveCount %d, MaxAttempts %d: open: %v", tc.maxReceive, tc.maxAttempts, err)
		}
		if err == nil {
			_ = tr.Close()
		} else if !strings.Contains(err.Error(), "Config.MaxAttempts") {
			t.Errorf("refusal does not name Config.MaxAttempts: %v", err)
		}
	}
}
