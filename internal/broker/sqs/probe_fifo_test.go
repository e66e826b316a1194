package sqs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestProbeChangeVisibility: ChangeMessageVisibility extends a lease past
// the queue's timeout, 0 makes the message visible again, and a delay
// hides it for that long.
func TestProbeChangeVisibility(t *testing.T) {
	p := newProbe(t, 1*time.Second, Queue{})
	ctx := context.Background()
	change := func(m types.Message, secs int32) {
		t.Helper()
		if _, err := p.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(p.url),
			ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: secs}); err != nil {
			t.Fatalf("change visibility to %ds: %v", secs, err)
		}
	}
	p.send(t, "m", "g", "d")
	m := p.receiveWithin(t, 1, 10*time.Second)[0]
	change(m, 3)
	if ms := p.receiveWithin(t, 1, 2*time.Second); len(ms) > 0 {
		t.Fatalf("an extended message came back after 2s of a 3s extension")
	}
	change(m, 0)
	start := time.Now()
	back := p.receiveWithin(t, 1, 10*time.Second)
	if len(back) != 1 {
		t.Fatal("visibility 0: the message did not come back")
	}
	t.Logf("visibility 0: back after %s", time.Since(start))
	change(back[0], 2)
	start = time.Now()
	if len(p.receiveWithin(t, 1, 10*time.Second)) != 1 {
		t.Fatal("visibility 2s: the message did not come back")
	}
	if took := time.Since(start); took < 1800*time.Millisecond {
		t.Fatalf("visibility 2s: back after %s", took)
	}
}

// TestProbeGroupNotHeld: goaws does not hold a message group while one of
// its messages is in flight. It remembers one locked group per queue (each
// lock replaces the last), so with two groups interleaved two messages of
// one group are in flight at once, and the second can be acknowledged
// before the first: real SQS FIFO would return A1 and B1 only.
func TestProbeGroupNotHeld(t *testing.T) {
	p := newProbeWith(t, Options{KeepGroups: true}, 2*time.Second, Queue{})
	for i, m := range []string{"A1", "B1", "A2", "B2"} {
		p.send(t, m, m[:1], string(rune('0'+i)))
	}
	got := bodies(p.receive(t, 10, 1))
	if !slices.Contains(got, "A1") || !slices.Contains(got, "A2") {
		t.Fatalf("one receive returned %q; goaws used to hand out A1 and A2 together", got)
	}
	t.Logf("one receive of groups A and B returned %q", got)
}

// TestProbeGroupSkipHides: a message that goaws skips because its group is
// locked is still marked in flight: it stays invisible, without being
// delivered, for a whole visibility timeout.
func TestProbeGroupSkipHides(t *testing.T) {
	p := newProbeWith(t, Options{KeepGroups: true}, 2*time.Second, Queue{})
	p.send(t, "A1", "A", "1")
	p.send(t, "A2", "A", "2")
	start := time.Now()
	first := p.receive(t, 10, 1)
	if got := bodies(first); !slices.Equal(got, []string{"A1"}) {
		t.Fatalf("first receive %q, want [A1]", got)
	}
	if _, err := p.c.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: first[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	next := p.receiveWithin(t, 1, 10*time.Second)
	took := time.Since(start)
	if got := bodies(next); !slices.Equal(got, []string{"A2"}) {
		t.Fatalf("then %q, want [A2]", got)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("A2 came %s after A1 was received and deleted; goaws used to hide it for the 2s lease", took)
	}
	t.Logf("A2 came %s after A1 was received and deleted at once", took)
}

// TestProbeOwnGroups: by default the server gives each message a group of
// its own, so one receive returns several messages sent in one group, in
// order, and none is hidden undelivered.
func TestProbeOwnGroups(t *testing.T) {
	p := newProbe(t, 2*time.Second, Queue{})
	want := []string{"A1", "A2", "A3", "B1"}
	for i, m := range want {
		p.send(t, m, m[:1], string(rune('0'+i)))
	}
	if got := bodies(p.receive(t, 10, 1)); !slices.Equal(got, want) {
		t.Fatalf("one receive returned %q, want %q", got, want)
	}
}

// TestProbeDeleteBatch: DeleteMessageBatch deletes the entries whose
// receipt handle is current and lists them as Successful; an entry with a
// stale handle is listed nowhere (real SQS lists it under Failed).
func TestProbeDeleteBatch(t *testing.T) {
	p := newProbe(t, 1*time.Second, Queue{})
	p.send(t, "x", "gx", "x")
	stale := p.receiveWithin(t, 1, 10*time.Second)[0]
	current := p.receiveWithin(t, 1, 10*time.Second)[0] // after the lease ran out
	p.send(t, "y", "gy", "y")
	y := p.receiveWithin(t, 1, 10*time.Second)[0]
	out, err := p.c.DeleteMessageBatch(context.Background(), &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.url),
		Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("stale"), ReceiptHandle: stale.ReceiptHandle},
			{Id: aws.String("y"), ReceiptHandle: y.ReceiptHandle},
		}})
	if err != nil {
		t.Fatalf("delete batch: %v", err)
	}
	var ok []string
	for _, e := range out.Successful {
		ok = append(ok, aws.ToString(e.Id))
	}
	if !slices.Equal(ok, []string{"y"}) || len(out.Failed) != 0 {
		t.Fatalf("successful %q, failed %+v; goaws used to list only y, and the stale entry nowhere", ok, out.Failed)
	}
	if _, err := p.c.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: current.ReceiptHandle}); err != nil {
		t.Fatalf("the stale entry's message is still there under its current handle: %v", err)
	}
	if ms := p.receive(t, 10, 1); len(ms) > 0 {
		t.Fatalf("deleted messages came back: %q", bodies(ms))
	}
}

// TestProbeRedrive: with a redrive policy, a message that returned to
// visibility more than maxReceiveCount times moves to the dead-letter
// queue.
func TestProbeRedrive(t *testing.T) {
	dlq := newProbe(t, 1*time.Second, Queue{})
	p := newProbe(t, 1*time.Second, Queue{MaxReceiveCount: 2, DeadLetterQueueARN: dlq.arn})
	p.send(t, "poison", "g", "p")
	received := 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		received += len(p.receive(t, 10, 1))
		if ms := dlq.receive(t, 10, 0); len(ms) > 0 {
			if aws.ToString(ms[0].Body) != "poison" {
				t.Fatalf("dead-letter queue holds %q", bodies(ms))
			}
			t.Logf("moved to the dead-letter queue after %d receives", received)
			if received < 2 {
				t.Fatalf("moved after %d receives, maxReceiveCount 2", received)
			}
			return
		}
	}
	t.Fatalf("not moved to the dead-letter queue after %d receives", received)
}
