package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport/sqs"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// drain receives raw messages (with their attributes) until want arrived
// or d passed, deleting each.
func (e env) drain(t *testing.T, want int, d time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end) && (want < 0 || len(got) < want); {
		out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(e.url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, m := range out.Messages {
			if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(e.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		got = append(got, out.Messages...)
	}
	return got
}

// TestPublishDedupe: the same event published twice within the
// deduplication window is stored once; the same identity with a different
// body is a collision, stored for the consumer's inbox to record.
func TestPublishDedupe(t *testing.T) {
	e := newEnv(t, 2*time.Second, broker.Queue{})
	ctx := context.Background()
	ev := transporttest.Event("opp-1", 1)
	other := []byte(strings.Replace(string(ev), `"n":1`, `"n":99`, 1))
	for _, b := range [][]byte{ev, ev, other} {
		if err := e.pub.Publish(ctx, b); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	if err := e.pub.PublishBatch(ctx, [][]byte{ev, transporttest.Event("opp-1", 2)}); err != nil {
		t.Fatalf("publish batch: %v", err)
	}
	got := e.drain(t, -1, 3*time.Second)
	var bs []string
	for _, m := range got {
		bs = append(bs, aws.ToString(m.Body))
	}
	if want := []string{string(ev), string(other), string(transporttest.Event("opp-1", 2))}; !slices.Equal(bs, want) {
		t.Fatalf("stored %q, want %q", bs, want)
	}
}

// TestPublishAttributes: the body is the event unchanged and the message
// carries the identity, type, partition key and version as attributes.
func TestPublishAttributes(t *testing.T) {
	e := newEnv(t, 2*time.Second, broker.Queue{})
	body := []byte(`{"specversion":"1.0","id":"evt-9","source":"crm","type":"deal.won","partitionkey":"opp-2481","objectversion":41,"data":{"x":"é"}}`)
	if err := e.pub.Publish(context.Background(), body); err != nil {
		t.Fatal(err)
	}
	got := e.drain(t, 1, 10*time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != string(body) {
		t.Fatalf("received %d messages, want the body unchanged", len(got))
	}
	attrs := map[string]string{}
	for k, v := range got[0].MessageAttributes {
		attrs[k] = aws.ToString(v.DataType) + ":" + aws.ToString(v.StringValue)
	}
	want := map[string]string{sqs.AttrID: "String:evt-9", sqs.AttrSource: "String:crm", sqs.AttrType: "String:deal.won",
		sqs.AttrPartitionKey: "String:opp-2481", sqs.AttrObjectVersion: "Number:41"}
	if fmt.Sprint(attrs) != fmt.Sprint(want) {
		t.Fatalf("attributes %v, want %v", attrs, want)
	}
}

// TestPublishRefusesInvalid: an invalid event is refused with ParseEvent's
// error and nothing is sent, alone or in a batch.
func TestPublishRefusesInvalid(t *testing.T) {
	e := newEnv(t, 2*time.Second, broker.Queue{})
	ctx := context.Background()
	bad := []byte(`{"specversion":"1.0","id":"x","source":"crm","objectversion":"v3"}`)
	if err := e.pub.Publish(ctx, bad); !errors.Is(err, seqboxtype.ErrInvalidEvent) {
		t.Fatalf("publish invalid: %v, want seqboxtype.ErrInvalidEvent", err)
	}
	if err := e.pub.PublishBatch(ctx, [][]byte{transporttest.Event("k", 1), bad}); !errors.Is(err, seqboxtype.ErrInvalidEvent) {
		t.Fatalf("publish batch with an invalid event: %v, want seqboxtype.ErrInvalidEvent", err)
	}
	if got := e.drain(t, -1, 2*time.Second); len(got) > 0 {
		t.Fatalf("%d messages were sent", len(got))
	}
}

// TestPublishBatchOrder: a batch larger than ten goes out in order, every
// event once.
func TestPublishBatchOrder(t *testing.T) {
	e := newEnv(t, 5*time.Second, broker.Queue{})
	var pub [][]byte
	var want []string
	for v := int64(1); v <= 25; v++ {
		pub = append(pub, transporttest.Event("inv-1", v))
		want = append(want, string(transporttest.Event("inv-1", v)))
	}
	if err := e.pub.PublishBatch(context.Background(), pub); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range e.drain(t, len(pub), 20*time.Second) {
		got = append(got, aws.ToString(m.Body))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
}

// TestGroupAndDedupeIDs: the group is the partition key (the id without
// one), hashed when SQS would refuse it; the deduplication id is a hash of
// the identity within SQS's 128 characters.
func TestGroupAndDedupeIDs(t *testing.T) {
	ev := func(src, id, key string) seqboxtype.Event {
		return seqboxtype.Event{Source: src, ID: id, PartitionKey: key}
	}
	long := strings.Repeat("k", 129)
	for _, tc := range []struct {
		ev   seqboxtype.Event
		want string
	}{
		{ev("crm", "1", "PED-4821"), "PED-4821"},
		{ev("crm", "evt-7", ""), "evt-7"},
		{ev("crm", "1", strings.Repeat("k", 128)), strings.Repeat("k", 128)},
	} {
		if got := sqs.MessageGroupID(tc.ev); got != tc.want {
			t.Errorf("group of %+v = %q, want %q", tc.ev, got, tc.want)
		}
	}
	for _, key := range []string{long, "pedido 4821", "pédido"} {
		g := sqs.MessageGroupID(ev("crm", "1", key))
		if !strings.HasPrefix(g, "sha256-") || len(g) > 128 || g != sqs.MessageGroupID(ev("erp", "2", key)) {
			t.Errorf("group of %q = %q: want a stable hash within 128 characters", key, g)
		}
	}
	a, b := sqs.DeduplicationID(ev("crm", "1", "x")), sqs.DeduplicationID(ev("crm", "1", "y"))
	if a != b || len(a) > 128 {
		t.Errorf("dedupe ids of one identity: %q and %q", a, b)
	}
	if sqs.DeduplicationID(ev("crm", "1", "")) == sqs.DeduplicationID(ev("erp", "1", "")) ||
		sqs.DeduplicationID(ev("ab", "c", "")) == sqs.DeduplicationID(ev("a", "bc", "")) {
		t.Error("two identities share a dedupe id")
	}
}
