package sqs_test

import (
	"context"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/goleak"

	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/transport/sqs"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the SQS transport's broker suite") {
		return
	}
	goleak.VerifyTestMain(m)
}

// env is a goaws server on loopback with one fresh FIFO queue.
type env struct {
	client *awssqs.Client
	url    string
	pub    *sqs.Publisher
}

// newEnv starts goaws for the test and creates a FIFO queue with the given
// lease (visibility timeout) and redrive policy.
func newEnv(t testing.TB, lease time.Duration, q broker.Queue) env {
	t.Helper()
	s, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatalf("start goaws: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := broker.Client(s.Endpoint())
	q.VisibilityTimeout = lease
	url, _, err := broker.CreateQueue(context.Background(), c, broker.NewQueueName("seqbox", true), q)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sqs.NewPublisher(c, url)
	if err != nil {
		t.Fatal(err)
	}
	return env{client: c, url: url, pub: pub}
}

// open opens a member on the queue and closes it when the test ends.
func (e env) open(t testing.TB) *sqs.Transport {
	t.Helper()
	tr, err := sqs.Open(context.Background(), sqs.Config{Client: e.client, QueueURL: e.url})
	if err != nil {
		t.Fatalf("open transport: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}
