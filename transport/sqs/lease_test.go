package sqs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"

	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/sqs"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// receiveN receives from tr until it has n deliveries or d passed.
func receiveN(t *testing.T, tr transport.Transport, n int, d time.Duration) []transport.Delivery {
	t.Helper()
	var got []transport.Delivery
	for end := time.Now().Add(d); len(got) < n && time.Now().Before(end); {
		ds, err := tr.Receive(context.Background(), n-len(got))
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		got = append(got, ds...)
	}
	if len(got) < n {
		t.Fatalf("received %d of %d", len(got), n)
	}
	return got
}

// TestLeaseLost: once a delivery's visibility timeout ran out and the
// message went to another member, its Ack, Extend and Nack say
// transport.ErrLeaseLost and settle nothing; AckBatch reports the stale
// delivery and deletes the current one.
func TestLeaseLost(t *testing.T) {
	e := newEnv(t, 1*time.Second, broker.Queue{})
	if err := e.pub.PublishBatch(context.Background(), [][]byte{transporttest.Event("a", 1), transporttest.Event("b", 1)}); err != nil {
		t.Fatal(err)
	}
	first, second := e.open(t), e.open(t)
	stale := receiveN(t, first, 2, 10*time.Second)
	current := receiveN(t, second, 2, 10*time.Second) // after the lease ran out
	ctx := context.Background()
	for name, settle := range map[string]func() error{
		"ack":    func() error { return stale[0].Ack(ctx) },
		"extend": func() error { return stale[0].Extend(ctx, 10*time.Second) },
		"nack":   func() error { return stale[0].Nack(ctx, 0) },
	} {
		if err := settle(); !errors.Is(err, transport.ErrLeaseLost) {
			t.Fatalf("%s with a stale receipt: %v, want transport.ErrLeaseLost", name, err)
		}
	}
	err := second.AckBatch(ctx, []transport.Delivery{stale[1], current[0], current[1]})
	if !errors.Is(err, transport.ErrLeaseLost) {
		t.Fatalf("ack batch with a stale receipt: %v, want transport.ErrLeaseLost", err)
	}
	if ds, _ := second.Receive(ctx, 10); len(ds) > 0 {
		t.Fatalf("acknowledged messages came back: %s", ds[0].Body())
	}
	// Deleted, not merely hidden until their visibility timeout: nothing
	// is left in the queue to come back after a lease.
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl: &e.url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	if n := attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
		t.Fatalf("the queue still holds %s messages after they were acknowledged", n)
	}
}

// TestReceiveFillsLargeBatch: a Receive for more than SQS's ten per call
// gets them in a few quick calls.
func TestReceiveFillsLargeBatch(t *testing.T) {
	e := newEnv(t, 10*time.Second, broker.Queue{})
	var pub [][]byte
	for v := int64(1); v <= 25; v++ {
		pub = append(pub, transporttest.Event("k", v))
	}
	if err := e.pub.PublishBatch(context.Background(), pub); err != nil {
		t.Fatal(err)
	}
	// The member's client notes the wait of every ReceiveMessage call.
	var mu sync.Mutex
	var waits []int32
	client := awssqs.New(e.client.Options(), func(o *awssqs.Options) {
		o.Protocol = awsquery.New(schemas.AmazonSQS) // as broker.Client: goaws speaks the Query protocol
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("seqbox-count-receives",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if r, ok := in.Parameters.(*awssqs.ReceiveMessageInput); ok {
						mu.Lock()
						waits = append(waits, r.WaitTimeSeconds)
						mu.Unlock()
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
	tr, err := sqs.Open(context.Background(), sqs.Config{Client: client, QueueURL: e.url})
	if err != nil {
		t.Fatalf("open transport: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	ds, err := tr.Receive(context.Background(), 25)
	if err != nil || len(ds) != 25 {
		t.Fatalf("one Receive(25) returned %d deliveries, err %v", len(ds), err)
	}
	// Quick: three pages of ten at most, and only the first may
	// long-poll; the others ask for what is ready now.
	mu.Lock()
	if len(waits) != 3 || waits[1] != 0 || waits[2] != 0 {
		t.Fatalf("Receive(25) made ReceiveMessage calls with waits %v, want three, the last two not waiting", waits)
	}
	mu.Unlock()
	if err := tr.AckBatch(context.Background(), ds); err != nil {
		t.Fatalf("ack batch of 25: %v", err)
	}
	if tr.Lease() != 10*time.Second {
		t.Fatalf("Lease() = %s, want the queue's 10s", tr.Lease())
	}
}
