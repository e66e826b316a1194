package sqs

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestStartLoopbackOnly: Start refuses an address other processes on the
// network could reach.
func TestStartLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "example.com:0", "nonsense"} {
		if s, err := Start(Options{Addr: addr}); err == nil {
			s.Close()
			t.Errorf("Start(%q) succeeded", addr)
		}
	}
}

// TestServersShareQueues: goaws's queues belong to the process, so a queue
// created through one server is reachable through another, and survives
// the first server's Close; a queue created without attributes gets SQS's
// 30 s visibility timeout.
func TestServersShareQueues(t *testing.T) {
	a, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Start(Options{})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	name := NewQueueName("shared", true)
	if _, err := Client(a.Endpoint()).CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	cb := Client(b.Endpoint())
	url, err := cb.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("the queue is gone with the first server: %v", err)
	}
	out, err := cb.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	if v := out.Attributes["VisibilityTimeout"]; v != "30" {
		t.Fatalf("default visibility timeout %q, want 30", v)
	}
}
