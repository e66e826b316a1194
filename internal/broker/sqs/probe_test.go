package sqs

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// The probes pin down what goaws v0.4.5 really does where the SQS
// transport relies on it, or where it differs from real SQS. A probe that
// starts failing after an upgrade means the list in transport/sqs's doc
// (and the transport's declared Features) must be revisited.

// TestProbeProtocol: goaws answers only the Query protocol; the SDK's
// default JSON protocol is refused, so Client must switch.
func TestProbeProtocol(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	def := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint()),
		Credentials: Client(s.Endpoint()).Options().Credentials, RetryMaxAttempts: 1})
	if _, err := def.ListQueues(context.Background(), &awssqs.ListQueuesInput{}); err == nil {
		t.Fatal("goaws answered the JSON protocol: Client's Query protocol switch may be unneeded")
	}
	if _, err := Client(s.Endpoint()).ListQueues(context.Background(), &awssqs.ListQueuesInput{}); err != nil {
		t.Fatalf("list queues over the Query protocol: %v", err)
	}
}

// TestProbeRoundTrip: body and message attributes come back exactly, and
// the SDK's MD5 checks of body and attributes pass.
func TestProbeRoundTrip(t *testing.T) {
	p := newProbe(t, 2*time.Second, Queue{})
	body := `{"id":"a-1","data":{"s":"tab\t, cr\r, é, 😀, <&>"}}`
	_, err := p.c.SendMessage(context.Background(), &awssqs.SendMessageInput{
		QueueUrl: aws.String(p.url), MessageBody: aws.String(body),
		MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"ce-id":                 {DataType: aws.String("String"), StringValue: aws.String("a-1")},
			"seqbox-object-version": {DataType: aws.String("Number"), StringValue: aws.String("7")},
		},
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	ms := p.receiveWithin(t, 1, 10*time.Second)
	if len(ms) != 1 || aws.ToString(ms[0].Body) != body {
		t.Fatalf("received %q, want [%q]", bodies(ms), body)
	}
	if v := ms[0].MessageAttributes["seqbox-object-version"]; aws.ToString(v.StringValue) != "7" || aws.ToString(v.DataType) != "Number" {
		t.Fatalf("attribute came back as %+v", v)
	}
}

// TestProbeDedupe: a second send with the same MessageDeduplicationId is
// dropped while the first is in the queue; once the first is deleted,
// goaws forgets the id (real SQS keeps it for five minutes).
func TestProbeDedupe(t *testing.T) {
	p := newProbe(t, 2*time.Second, Queue{})
	p.send(t, "one", "g", "dup")
	p.send(t, "two", "g", "dup")
	ms := p.receiveWithin(t, 1, 10*time.Second)
	if got := bodies(ms); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("received %q, want [one]", got)
	}
	if more := p.receive(t, 10, 1); len(more) > 0 {
		t.Fatalf("the duplicate was stored too: %q", bodies(more))
	}
	if _, err := p.c.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	p.send(t, "three", "g", "dup")
	if got := bodies(p.receiveWithin(t, 1, 10*time.Second)); !slices.Equal(got, []string{"three"}) {
		t.Fatalf("after delete, resend with the same id: received %q; goaws used to accept it", got)
	}
}

// TestProbeReceiveCount: ApproximateReceiveCount is always 1 in goaws.
func TestProbeReceiveCount(t *testing.T) {
	p := newProbe(t, 1*time.Second, Queue{})
	p.send(t, "m", "g", "d")
	for i := range 3 {
		ms := p.receiveWithin(t, 1, 10*time.Second)
		if len(ms) != 1 {
			t.Fatalf("delivery %d: got %d messages", i+1, len(ms))
		}
		if n := ms[0].Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]; n != "1" {
			t.Fatalf("delivery %d: ApproximateReceiveCount %q; goaws used to report 1 always", i+1, n)
		}
	}
}

// TestProbeLease: a received message is invisible for the visibility
// timeout and comes back after it; its old receipt handle is then refused
// by DeleteMessage and ChangeMessageVisibility.
func TestProbeLease(t *testing.T) {
	p := newProbe(t, 1*time.Second, Queue{})
	p.send(t, "m", "g", "d")
	first := p.receiveWithin(t, 1, 10*time.Second)
	start := time.Now()
	again := p.receiveWithin(t, 1, 10*time.Second)
	if len(first) != 1 || len(again) != 1 {
		t.Fatalf("received %d then %d messages", len(first), len(again))
	}
	if took := time.Since(start); took < 800*time.Millisecond {
		t.Fatalf("came back after %s, before its 1s visibility timeout", took)
	}
	ctx := context.Background()
	_, err := p.c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: first[0].ReceiptHandle})
	if code := apiCode(err); code != "AWS.SimpleQueueService.QueueExists" {
		t.Fatalf("delete with a stale receipt handle: %v (code %q); goaws used to say QueueExists", err, code)
	}
	_, err = p.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(p.url),
		ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 5})
	if code := apiCode(err); code != "AWS.SimpleQueueService.MessageNotInFlight" {
		t.Fatalf("change visibility with a stale receipt handle: %v (code %q)", err, code)
	}
	if _, err := p.c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: again[0].ReceiptHandle}); err != nil {
		t.Fatalf("delete with the current receipt handle: %v", err)
	}
}

// apiCode is an error's API error code, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
