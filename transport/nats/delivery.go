package nats

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/seqbox/seqbox/transport"
)

// delivery is one delivery of a stream message to a member.
type delivery struct {
	t       *Transport
	msg     jetstream.Msg
	attempt int
}

// PublishedAt implements transport.PublishTimer: when the stream stored
// the message (zero when its metadata cannot be read).
func (d *delivery) PublishedAt() time.Time {
	md, err := d.msg.Metadata()
	if err != nil {
		return time.Time{}
	}
	return md.Timestamp
}

// Header returns the message's NATS header of that name, matched
// without regard to case.
func (d *delivery) Header(name string) string {
	for k, v := range d.msg.Headers() {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0]
		}
	}
	return ""
}

// Body is the published CloudEvent.
func (d *delivery) Body() []byte { return d.msg.Data() }

// Attempt is JetStream's delivery count (NumDelivered): 1 on the first
// delivery, one more on each redelivery, whatever caused it.
func (d *delivery) Attempt() int { return d.attempt }

// Ack acknowledges the message and waits for the server's confirmation.
func (d *delivery) Ack(ctx context.Context) error {
	if err := d.msg.DoubleAck(ctx); err != nil {
		return d.t.fail(fmt.Sprintf("ack %s", d.msg.Reply()), err)
	}
	return nil
}

// Nack asks for redelivery after delay (NakWithDelay), or at once.
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	var err error
	if delay > 0 {
		err = d.msg.NakWithDelay(delay)
	} else {
		err = d.msg.Nak()
	}
	if err == nil {
		err = d.t.flush(ctx)
	}
	if err != nil {
		return d.t.fail(fmt.Sprintf("nack %s", d.msg.Reply()), err)
	}
	return nil
}

// Extend tells the server the message is still being worked on
// (InProgress): its AckWait starts again. JetStream always extends by the
// consumer's AckWait, so d is not used; the caller extends again before
// that runs out.
func (d *delivery) Extend(ctx context.Context, _ time.Duration) error {
	if err := d.msg.InProgress(); err != nil {
		return d.t.fail(fmt.Sprintf("extend %s", d.msg.Reply()), err)
	}
	return nil
}

// flushTimeout bounds a flush when ctx has no deadline.
const flushTimeout = 5 * time.Second

// flush waits until the server has read what the connection sent.
func (t *Transport) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	return t.nc.FlushWithContext(ctx)
}

var (
	_ transport.HeaderCarrier = (*delivery)(nil)
	_ transport.PublishTimer  = (*delivery)(nil)
)
