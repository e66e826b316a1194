package pubsub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	ps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seqbox/seqbox/transport"
)

// maxPull is the most messages one Pull asks for, and maxAckIDs the most
// ack IDs one Acknowledge or ModifyAckDeadline carries (Pub/Sub bounds
// the request size, and ack IDs can be a few hundred bytes each).
const (
	maxPull   = 1000
	maxAckIDs = 1000
	// maxSeen bounds the in-process attempt counts kept when the
	// subscription has no dead-letter policy.
	maxSeen = 100_000
)

var (
	_ transport.Transport  = (*Transport)(nil)
	_ transport.BatchAcker = (*Transport)(nil)
)

// Transport is one member of a Pub/Sub subscription. It pulls with the
// unary Pull RPC and settles with Acknowledge and ModifyAckDeadline, so
// that every lease is exactly the one seqbox asks for: the library's
// callback Subscriber would extend leases on its own, acknowledge
// asynchronously without telling whether it worked, and nack what is in
// flight when it stops.
type Transport struct {
	c   *ps.Client
	sub string
	cfg Config
	// brokerCounts is true when the subscription has a dead-letter
	// policy: Pub/Sub then counts deliveries (DeliveryAttempt).
	brokerCounts bool
	// ordered and exactlyOnce are the subscription's settings.
	ordered, exactlyOnce bool

	// stop cancels in-flight Pulls when the transport closes.
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
	// seen counts deliveries per message ID when Pub/Sub does not.
	seen map[string]int
}

// Open opens a member of the subscription cfg.Subscription, which must
// exist (see Setup). It reads the subscription and refuses a dead-letter
// policy that would dead-letter before seqbox (MaxDeliveryAttempts not
// above cfg.RetryMaxAttempts).
func Open(ctx context.Context, cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults("Subscription")
	if err != nil {
		return nil, err
	}
	c, err := ps.NewClient(ctx, cfg.Project, cfg.clientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("pubsub: open: %w", err)
	}
	name := subscriptionName(cfg.Project, cfg.Subscription)
	s, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name})
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("pubsub: open: read subscription %s (create it with Setup): %w", name, err)
	}
	if p := s.GetDeadLetterPolicy(); p != nil && int(p.GetMaxDeliveryAttempts()) <= cfg.RetryMaxAttempts {
		_ = c.Close()
		return nil, invalid("RetryMaxAttempts", "is %d, but subscription %s dead-letters after %d deliveries: Pub/Sub would dead-letter before seqbox",
			cfg.RetryMaxAttempts, name, p.GetMaxDeliveryAttempts())
	}
	t := &Transport{
		c: c, sub: name, cfg: cfg,
		brokerCounts: s.GetDeadLetterPolicy() != nil,
		ordered:      s.GetEnableMessageOrdering(),
		exactlyOnce:  s.GetEnableExactlyOnceDelivery(),
		seen:         map[string]int{},
	}
	t.ctx, t.stop = context.WithCancel(context.Background())
	return t, nil
}

// BrokerCountsAttempts reports whether Attempt comes from Pub/Sub (the
// subscription has a dead-letter policy) rather than from this member's
// own count, which misses deliveries to other members.
func (t *Transport) BrokerCountsAttempts() bool { return t.brokerCounts }

// Ordered reports whether the subscription delivers each ordering key in
// publication order.
func (t *Transport) Ordered() bool { return t.ordered }

// begin registers a call, or refuses it after Close.
func (t *Transport) begin() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return transport.ErrClosed
	}
	t.calls.Add(1)
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Receive pulls up to max messages, waiting up to Config.Wait for some.
func (t *Transport) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	if err := t.begin(); err != nil {
		return nil, err
	}
	defer t.calls.Done()
	n := min(max, maxPull)
	if n < 1 {
		n = 1
	}
	pctx, cancel := context.WithTimeout(ctx, t.cfg.Wait)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	res, err := t.c.SubscriptionAdminClient.Pull(pctx, &pubsubpb.PullRequest{Subscription: t.sub, MaxMessages: int32(n)})
	switch {
	case err == nil:
	case t.isClosed():
		return nil, transport.ErrClosed
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case pctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded:
		// Waited Config.Wait and nothing came (the server may notice the
		// deadline first). A message Pub/Sub had already leased to this
		// call comes back after its ack deadline.
		return nil, nil
	default:
		return nil, fmt.Errorf("pubsub: receive from %s: %w", t.sub, err)
	}
	ds := make([]transport.Delivery, 0, len(res.GetReceivedMessages()))
	for _, rm := range res.GetReceivedMessages() {
		m := rm.GetMessage()
		ds = append(ds, &delivery{t: t, ackID: rm.GetAckId(), msgID: m.GetMessageId(), body: m.GetData(),
			attempt: t.attempt(m.GetMessageId(), rm.GetDeliveryAttempt()), attrs: m.GetAttributes(), published: m.GetPublishTime().AsTime()})
	}
	return ds, nil
}

// attempt is Pub/Sub's delivery attempt when it counts, or this member's
// own count of the message's deliveries.
func (t *Transport) attempt(msgID string, broker int32) int {
	if broker > 0 {
		return int(broker)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.seen) >= maxSeen {
		clear(t.seen)
	}
	t.seen[msgID]++
	return t.seen[msgID]
}

// forget drops the in-process count of settled messages.
func (t *Transport) forget(ds []*delivery) {
	if t.brokerCounts {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range ds {
		delete(t.seen, d.msgID)
	}
}

// AckBatch acknowledges every delivery, in as few Acknowledge calls as
// the request size allows. With exactly-once delivery, the ones Pub/Sub
// reports expired are counted in an error matching transport.ErrLeaseLost
// and the others are settled; without it Pub/Sub reports nothing, and a
// late acknowledgement is silently dropped.
func (t *Transport) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	own := make([]*delivery, len(ds))
	for i, td := range ds {
		d, ok := td.(*delivery)
		if !ok || d.t != t {
			return fmt.Errorf("pubsub: ack batch got a delivery from another transport")
		}
		own[i] = d
	}
	return t.ack(ctx, own)
}

func (t *Transport) ack(ctx context.Context, ds []*delivery) error {
	if err := t.begin(); err != nil {
		return err
	}
	defer t.calls.Done()
	lost := 0
	for chunk := range slices.Chunk(ds, maxAckIDs) {
		n, err := settle(ctx, ackIDs(chunk), func(ctx context.Context, ids []string) error {
			return t.c.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: t.sub, AckIds: ids})
		})
		if err != nil {
			return fmt.Errorf("pubsub: ack on %s: %w", t.sub, err)
		}
		lost += n
	}
	t.forget(ds)
	if lost > 0 {
		return fmt.Errorf("%w: %d of %d acks on %s", transport.ErrLeaseLost, lost, len(ds), t.sub)
	}
	return nil
}

// modify sets the ack deadline of ds to secs seconds from now (0: nack).
func (t *Transport) modify(ctx context.Context, what string, ds []*delivery, secs int32) error {
	if err := t.begin(); err != nil {
		return err
	}
	defer t.calls.Done()
	lost, err := settle(ctx, ackIDs(ds), func(ctx context.Context, ids []string) error {
		return t.c.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: t.sub, AckIds: ids, AckDeadlineSeconds: secs})
	})
	if err != nil {
		return fmt.Errorf("pubsub: %s on %s: %w", what, t.sub, err)
	}
	if lost > 0 {
		return fmt.Errorf("%w: %s on %s", transport.ErrLeaseLost, what, t.sub)
	}
	return nil
}

// Close stops the member: a Pull in flight is abandoned, and nothing is
// settled, so the deliveries it holds come back to another member when
// their ack deadline expires. Settling calls already running finish
// first; later ones return transport.ErrClosed.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.stop()
	t.calls.Wait()
	if err := t.c.Close(); err != nil && !strings.Contains(err.Error(), "the client connection is closing") {
		return fmt.Errorf("pubsub: close: %w", err)
	}
	return nil
}

func ackIDs(ds []*delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ackID
	}
	return ids
}
