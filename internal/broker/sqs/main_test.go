package sqs

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/seqbox/seqbox/internal/shorttest"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the in-process SQS broker's suite") {
		return
	}
	goleak.VerifyTestMain(m)
}

// probe is a started server, a client for it and a fresh queue.
type probe struct {
	c   *awssqs.Client
	url string
	arn string
}

// newProbe starts a server for the test and creates a fresh FIFO queue
// with the given lease.
func newProbe(t *testing.T, lease time.Duration, q Queue) probe {
	t.Helper()
	return newProbeWith(t, Options{}, lease, q)
}

// newProbeWith is newProbe with server options.
func newProbeWith(t *testing.T, opts Options, lease time.Duration, q Queue) probe {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("start goaws: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := Client(s.Endpoint())
	q.VisibilityTimeout = lease
	url, arn, err := CreateQueue(context.Background(), c, NewQueueName("probe", true), q)
	if err != nil {
		t.Fatal(err)
	}
	return probe{c: c, url: url, arn: arn}
}

// send sends body in group with the deduplication id dedup.
func (p probe) send(t *testing.T, body, group, dedup string) {
	t.Helper()
	_, err := p.c.SendMessage(context.Background(), &awssqs.SendMessageInput{
		QueueUrl: aws.String(p.url), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
	})
	if err != nil {
		t.Fatalf("send %s: %v", body, err)
	}
}

// receive makes one ReceiveMessage call for up to max messages.
func (p probe) receive(t *testing.T, max int32, wait int32) []types.Message {
	t.Helper()
	out, err := p.c.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
		QueueUrl: aws.String(p.url), MaxNumberOfMessages: max, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return out.Messages
}

// receiveWithin polls until it has n messages or d passed.
func (p probe) receiveWithin(t *testing.T, n int, d time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	for end := time.Now().Add(d); len(got) < n && time.Now().Before(end); {
		got = append(got, p.receive(t, 10, 1)...)
	}
	return got
}

// bodies lists the messages' bodies in order.
func bodies(ms []types.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = aws.ToString(m.Body)
	}
	return out
}
