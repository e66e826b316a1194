package pubsub

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// delivery is one pulled message, identified by its ack ID.
type delivery struct {
	t       *Transport
	ackID   string
	msgID   string
	body    []byte
	attempt int
	attrs   map[string]string
	// published is the message's publish time.
	published time.Time
}

// PublishedAt implements transport.PublishTimer: the message's publish
// time (zero when Pub/Sub did not give it).
func (d *delivery) PublishedAt() time.Time {
	if d.published.Unix() <= 0 {
		return time.Time{}
	}
	return d.published
}

// Header returns the message's attribute of that name.
func (d *delivery) Header(name string) string { return d.attrs[name] }

func (d *delivery) Body() []byte { return d.body }

// Attempt is Pub/Sub's delivery attempt when the subscription has a
// dead-letter policy; otherwise this member's own count, which misses
// deliveries to other members.
func (d *delivery) Attempt() int { return d.attempt }

// Ack acknowledges the message.
func (d *delivery) Ack(ctx context.Context) error {
	return d.t.ack(ctx, []*delivery{d})
}

// Nack sets the message's ack deadline to delay, after which Pub/Sub
// delivers it again: rounded up to whole seconds (so never early), capped
// at 600 s, Pub/Sub's longest ack deadline; 0 makes it available at once.
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	return d.t.modify(ctx, "nack", []*delivery{d}, deadlineSeconds(delay, 0))
}

// Extend sets the message's ack deadline to d from now: rounded up to
// whole seconds, at least 1 s, capped at 600 s.
func (d *delivery) Extend(ctx context.Context, by time.Duration) error {
	return d.t.modify(ctx, "extend", []*delivery{d}, deadlineSeconds(by, 1))
}

// deadlineSeconds turns a duration into ModifyAckDeadline's whole seconds,
// rounding up and clamping to [floor, 600].
func deadlineSeconds(d time.Duration, floor int32) int32 {
	if d <= 0 {
		return floor
	}
	s := (d + time.Second - 1) / time.Second
	if s > MaxAckDeadline/time.Second {
		s = MaxAckDeadline / time.Second
	}
	return max(int32(s), floor)
}

var (
	_ transport.HeaderCarrier = (*delivery)(nil)
	_ transport.PublishTimer  = (*delivery)(nil)
)
