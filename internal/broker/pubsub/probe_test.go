package pubsub_test

// Probes of the pstest fake: each pins down a behaviour transport/pubsub
// relies on, or one where pstest differs from Pub/Sub (so that the
// transport's documentation stays true if pstest changes). They speak the
// raw v1 RPCs, not the transport.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	broker "github.com/seqbox/seqbox/internal/broker/pubsub"
	"github.com/seqbox/seqbox/internal/shorttest"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the in-process Pub/Sub broker's suite") {
		return
	}
	// OpenCensus, imported by the client, starts a worker in a package
	// init that cannot be stopped.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// rig is a fake server, a client and helpers on one fresh subscription.
type rig struct {
	t     *testing.T
	srv   *broker.Server
	c     *ps.Client
	topic string
	sub   string
}

var seq atomic.Int64

// newRig starts a server and creates a topic and a subscription that
// change adjusts.
func newRig(t *testing.T, change func(s *pubsubpb.Subscription)) *rig {
	t.Helper()
	srv, err := broker.Start(0)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := ps.NewClient(context.Background(), broker.Project, srv.ClientOptions()...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	n := seq.Add(1)
	r := &rig{t: t, srv: srv, c: c,
		topic: fmt.Sprintf("projects/%s/topics/t%d", broker.Project, n),
		sub:   fmt.Sprintf("projects/%s/subscriptions/s%d", broker.Project, n)}
	r.createTopic(r.topic)
	s := &pubsubpb.Subscription{Name: r.sub, Topic: r.topic, AckDeadlineSeconds: 2}
	if change != nil {
		change(s)
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(context.Background(), s); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	return r
}

func (r *rig) createTopic(name string) {
	r.t.Helper()
	if _, err := r.c.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: name}); err != nil {
		r.t.Fatalf("create topic %s: %v", name, err)
	}
}

func (r *rig) publish(key string, data ...string) {
	r.t.Helper()
	for _, d := range data {
		r.srv.Fake().PublishOrdered(r.topic, []byte(d), map[string]string{"ce-id": d}, key)
	}
}

// pull pulls once from sub (r.sub when empty).
func (r *rig) pull(sub string) []*pubsubpb.ReceivedMessage {
	r.t.Helper()
	if sub == "" {
		sub = r.sub
	}
	res, err := r.c.SubscriptionAdminClient.Pull(context.Background(), &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 100})
	if err != nil {
		r.t.Fatalf("pull: %v", err)
	}
	return res.GetReceivedMessages()
}

func (r *rig) ack(ms ...*pubsubpb.ReceivedMessage) {
	r.t.Helper()
	if err := r.c.SubscriptionAdminClient.Acknowledge(context.Background(), &pubsubpb.AcknowledgeRequest{Subscription: r.sub, AckIds: ids(ms)}); err != nil {
		r.t.Fatalf("ack: %v", err)
	}
}

func (r *rig) modack(secs int32, ms ...*pubsubpb.ReceivedMessage) {
	r.t.Helper()
	if err := r.c.SubscriptionAdminClient.ModifyAckDeadline(context.Background(), &pubsubpb.ModifyAckDeadlineRequest{
		Subscription: r.sub, AckIds: ids(ms), AckDeadlineSeconds: secs}); err != nil {
		r.t.Fatalf("modack: %v", err)
	}
}

func ids(ms []*pubsubpb.ReceivedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetAckId()
	}
	return out
}

func data(ms []*pubsubpb.ReceivedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.GetMessage().GetData())
	}
	return out
}

// one fails unless ms is exactly one message with the given data.
func one(t *testing.T, ms []*pubsubpb.ReceivedMessage, want string) *pubsubpb.ReceivedMessage {
	t.Helper()
	if len(ms) != 1 || string(ms[0].GetMessage().GetData()) != want {
		t.Fatalf("pulled %q, want just %q", data(ms), want)
	}
	return ms[0]
}

// TestProbeOrderedLeasesOneHeadPerKey: on an ordered subscription pstest
// leases only the oldest unacknowledged message of each key; a nacked
// head comes back before its successors; acking it releases the next.
func TestProbeOrderedLeasesOneHeadPerKey(t *testing.T) {
	r := newRig(t, func(s *pubsubpb.Subscription) { s.EnableMessageOrdering = true })
	r.publish("k", "k1", "k2", "k3")
	r.publish("j", "j1", "j2")
	heads := r.pull("")
	if len(heads) != 2 {
		t.Fatalf("first pull %q, want the two heads k1 and j1", data(heads))
	}
	if got := r.pull(""); len(got) != 0 {
		t.Fatalf("pulled %q while both heads were leased", data(got))
	}
	for _, h := range heads {
		r.modack(0, h) // nack both
	}
	again := r.pull("")
	if len(again) != 2 {
		t.Fatalf("after nack pulled %q, want the two heads again", data(again))
	}
	for _, m := range again {
		if d := string(m.GetMessage().GetData()); d != "k1" && d != "j1" {
			t.Fatalf("after nacking the heads got %s before them", d)
		}
	}
	r.ack(again...)
	next := r.pull("")
	if got := data(next); len(got) != 2 || (got[0] != "k2" && got[0] != "j2") {
		t.Fatalf("after acking the heads pulled %q, want k2 and j2", got)
	}
}

// TestProbeAckDeadlines: the subscription's ack deadline leases a pulled
// message; ModifyAckDeadline(d) moves its redelivery d seconds from now
// (Extend, Nack with delay), and ModifyAckDeadline(0) releases it at
// once (Nack). pstest accepts a 2 s subscription deadline, below Pub/Sub's
// 10 s minimum. The fake's clock is the test's: each step says what is
// leased at a given instant, whatever the machine's speed.
func TestProbeAckDeadlines(t *testing.T) {
	r := newRig(t, nil)
	clock := fakeClock(r)
	r.publish("", "m")
	m := one(t, r.pull(""), "m")
	// Extended every second, it stays leased well past the 2 s deadline.
	for range 4 {
		r.modack(2, m)
		if got := r.pull(""); len(got) > 0 {
			t.Fatalf("extended message pulled again %s after its first delivery", clock.elapsed())
		}
		clock.advance(time.Second)
	}
	r.modack(0, m)
	m = one(t, r.pull(""), "m")
	clock.start()
	r.modack(1, m) // nack with a 1 s delay
	clock.advance(900 * time.Millisecond)
	if got := r.pull(""); len(got) > 0 {
		t.Fatalf("nacked with 1 s delay, back after %s", clock.elapsed())
	}
	clock.advance(200 * time.Millisecond)
	one(t, r.pull(""), "m") // back after the 1 s delay
	// Not settled: it comes back after the subscription's 2 s deadline,
	// not before.
	clock.start()
	clock.advance(1900 * time.Millisecond)
	if got := r.pull(""); len(got) > 0 {
		t.Fatalf("leased for 2 s, back after %s", clock.elapsed())
	}
	clock.advance(200 * time.Millisecond)
	one(t, r.pull(""), "m")
}

// clock is a fake's time, moved only by the test.
type clock struct {
	mu        sync.Mutex
	now, mark time.Time
}

// fakeClock makes r's fake read its time from a clock the test moves.
func fakeClock(r *rig) *clock {
	c := &clock{now: time.Now()}
	c.mark = c.now
	r.srv.Fake().SetTimeNowFunc(func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now
	})
	return c
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// start marks the instant elapsed counts from.
func (c *clock) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mark = c.now
}

func (c *clock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.mark)
}

// TestProbeDeliveryAttempt: DeliveryAttempt counts deliveries only when
// the subscription has a dead-letter policy; it is 0 otherwise.
func TestProbeDeliveryAttempt(t *testing.T) {
	for _, dlp := range []bool{true, false} {
		r := newRig(t, func(s *pubsubpb.Subscription) {
			if dlp {
				s.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: s.Topic, MaxDeliveryAttempts: 10}
			}
		})
		r.publish("", "m")
		for n := int32(1); n <= 3; n++ {
			m := one(t, r.pull(""), "m")
			want := n
			if !dlp {
				want = 0
			}
			if got := m.GetDeliveryAttempt(); got != want {
				t.Fatalf("dead-letter policy %v: delivery attempt %d, want %d", dlp, got, want)
			}
			r.modack(0, m)
		}
	}
}

// TestProbeDeadLetter: after MaxDeliveryAttempts deliveries the message
// goes to the dead-letter topic, data and attributes unchanged, and the
// subscription does not deliver it again. pstest accepts a
// MaxDeliveryAttempts of 2 (Pub/Sub wants 5 to 100) and adds none of the
// CloudPubSubDeadLetterSource* attributes Pub/Sub adds.
func TestProbeDeadLetter(t *testing.T) {
	var dlt, dls string
	r := newRig(t, func(s *pubsubpb.Subscription) {
		dlt, dls = s.Topic+"-dl", s.Name+"-dl"
	})
	r.createTopic(dlt)
	ctx := context.Background()
	if _, err := r.c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: dls, Topic: dlt}); err != nil {
		t.Fatal(err)
	}
	withDL := r.sub + "-with-dl"
	if _, err := r.c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: withDL, Topic: r.topic, AckDeadlineSeconds: 2,
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dlt, MaxDeliveryAttempts: 2}}); err != nil {
		t.Fatalf("pstest refused MaxDeliveryAttempts 2: %v", err)
	}
	r.sub = withDL
	r.publish("", "poison")
	for range 2 {
		r.modack(0, one(t, r.pull(""), "poison"))
	}
	if got := r.pull(""); len(got) > 0 {
		t.Fatalf("delivered %q after MaxDeliveryAttempts", data(got))
	}
	m := one(t, r.pull(dls), "poison")
	attrs := m.GetMessage().GetAttributes()
	if len(attrs) != 1 || attrs["ce-id"] != "poison" {
		t.Fatalf("dead-lettered attributes %v, want just ce-id=poison", attrs)
	}
}

// TestProbeDeliveryAttemptSharedAcrossSubscriptions: pstest counts a
// message's deliveries over every subscription of its topic (Pub/Sub
// counts per subscription), so a second subscription's first delivery
// reports the first one's deliveries plus one.
func TestProbeDeliveryAttemptSharedAcrossSubscriptions(t *testing.T) {
	r := newRig(t, func(s *pubsubpb.Subscription) {
		s.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: s.Topic, MaxDeliveryAttempts: 10}
	})
	other := r.sub + "-other"
	if _, err := r.c.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{Name: other, Topic: r.topic,
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: r.topic, MaxDeliveryAttempts: 10}}); err != nil {
		t.Fatal(err)
	}
	r.publish("", "m")
	one(t, r.pull(""), "m")
	if got := one(t, r.pull(other), "m").GetDeliveryAttempt(); got != 2 {
		t.Fatalf("second subscription's first delivery reports attempt %d; pstest used to report 2", got)
	}
}

// TestProbeNotEmulated pins what pstest does not do, each of which the
// transport's documentation states: an acknowledgement with a stale ack
// ID (the message was redelivered since) is accepted silently and settles
// nothing, even with exactly-once delivery enabled (Pub/Sub would answer
// PERMANENT_FAILURE_INVALID_ACK_ID); and a retry policy's backoff is not
// applied to a nack.
func TestProbeNotEmulated(t *testing.T) {
	r := newRig(t, func(s *pubsubpb.Subscription) {
		s.EnableExactlyOnceDelivery = true
		s.RetryPolicy = &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(10 * time.Second), MaximumBackoff: durationpb.New(60 * time.Second)}
	})
	fakeClock(r) // stands still: a backoff, had pstest one, would never pass
	r.publish("", "m")
	first := one(t, r.pull(""), "m")
	r.modack(0, first)
	back := r.pull("")
	if len(back) == 0 {
		t.Fatal("nacked message not back at the instant of its nack: pstest now applies the retry policy")
	}
	second := one(t, back, "m")
	r.ack(first) // stale: no error
	r.modack(0, second)
	one(t, r.pull(""), "m") // the stale ack settled nothing
}
