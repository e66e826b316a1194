package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// delivery is one handing out of one record.
type delivery struct {
	t       *Transport
	e       *entry
	attempt int
	seq     int
}

var _ transport.Delivery = (*delivery)(nil)

// Header returns the record's header of that name.
func (d *delivery) Header(name string) string {
	for _, h := range d.e.rec.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// Body is the record's value, the CloudEvent as published.
func (d *delivery) Body() []byte { return d.e.rec.Value }

// Attempt counts this record's deliveries: exactly within this member;
// across members exactly for the record at the committed offset and at
// least 2 for any other record an earlier owner handed out (see the
// package documentation).
func (d *delivery) Attempt() int { return d.attempt }

// PublishedAt implements transport.PublishTimer: the record's timestamp
// (the producer's, or the broker's append time, as the topic says).
func (d *delivery) PublishedAt() time.Time {
	if d.e.rec.Timestamp.Unix() <= 0 {
		return time.Time{}
	}
	return d.e.rec.Timestamp
}

// leasedLocked reports whether the delivery's partition is still in the
// assignment it was received in; t.mu is held.
func (d *delivery) leasedLocked() bool { return !d.t.closed && d.e.p.owned && d.e.epoch == d.e.p.epoch }

// Ack marks the record done and commits the partition's contiguous prefix
// of acknowledged offsets. The commit covers this record only once every
// earlier record of its partition is acknowledged too; until then the
// acknowledgement waits in the member. It reports transport.ErrLeaseLost
// when the partition was revoked, and an error matching ErrCommit when
// the commit failed (the next commit carries it again).
func (d *delivery) Ack(ctx context.Context) error {
	return d.t.ack(ctx, []*delivery{d})
}

// AckBatch acknowledges every delivery and commits once. Deliveries of
// revoked partitions are reported with transport.ErrLeaseLost.
func (t *Transport) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	ours := make([]*delivery, 0, len(ds))
	var errs []error
	for _, d := range ds {
		if kd, ok := d.(*delivery); ok && kd.t == t {
			ours = append(ours, kd)
		} else if err := d.Ack(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, t.ack(ctx, ours))...)
}

func (t *Transport) ack(ctx context.Context, ds []*delivery) error {
	if len(ds) == 0 {
		return nil
	}
	t.mu.Lock()
	marked := false
	for _, d := range ds {
		if d.leasedLocked() {
			d.e.acked = true
			d.e.p.advance()
			marked = true
		}
	}
	t.mu.Unlock()
	var failed map[*partition]error
	if marked {
		failed = t.commitOwned(ctx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	lost := 0
	seen := map[*partition]bool{}
	for _, d := range ds {
		switch {
		case !d.leasedLocked():
			lost++ // revoked before or while committing: the next owner has it
		case failed[d.e.p] != nil && !seen[d.e.p]:
			seen[d.e.p] = true
			errs = append(errs, failed[d.e.p])
		}
	}
	if lost > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d acknowledgements were for partitions revoked from this member", transport.ErrLeaseLost, lost, len(ds)))
	}
	return errors.Join(errs...)
}

// Nack hands the record out again from this member after delay. Kafka
// has no per-record nack: the record stays in the member, its partition's
// committed offset does not move past it, and the records after it in the
// partition keep flowing (so per-key order holds only until a nack; the
// version gate restores it). A rebalance before the delay ends gives the
// record to the partition's next owner instead.
func (d *delivery) Nack(_ context.Context, delay time.Duration) error {
	t := d.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if !d.leasedLocked() {
		return transport.ErrLeaseLost
	}
	if d.e.acked || d.e.waiting || d.seq != d.e.seq {
		return nil // settled already, or by a later delivery
	}
	d.e.waiting = true
	d.e.due = time.Now().Add(max(delay, 0))
	t.ready = append(t.ready, d.e)
	return nil
}

// Extend is a no-op while the partition is still assigned to this member:
// a Kafka partition is owned until a rebalance, not leased for a time. It
// reports transport.ErrLeaseLost once the partition was revoked.
func (d *delivery) Extend(context.Context, time.Duration) error {
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	if !d.leasedLocked() {
		return transport.ErrLeaseLost
	}
	return nil
}

var (
	_ transport.HeaderCarrier = (*delivery)(nil)
	_ transport.PublishTimer  = (*delivery)(nil)
)
