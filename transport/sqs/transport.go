package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/seqbox/seqbox/transport"
)

// Transport receives from one SQS queue. Several Transports (in one
// process or many) on the same queue compete for its messages.
type Transport struct {
	cfg   Config
	lease time.Duration
	// stop ends the receives in flight when the transport closes.
	stop   context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
}

var (
	_ transport.Transport  = (*Transport)(nil)
	_ transport.BatchAcker = (*Transport)(nil)
)

// maxBatch is SQS's limit on messages per ReceiveMessage and entries per
// DeleteMessageBatch or SendMessageBatch.
const maxBatch = 10

// Open checks that the queue exists, reads its visibility timeout (the
// lease) and, when cfg.MaxAttempts is set, its redrive policy.
func Open(ctx context.Context, cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	out, err := cfg.Client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout, types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return nil, fmt.Errorf("sqs: open %s: %w", cfg.QueueURL, err)
	}
	secs, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	if err != nil {
		return nil, fmt.Errorf("sqs: open %s: visibility timeout %q: %w", cfg.QueueURL, out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)], err)
	}
	if cfg.MaxAttempts > 0 {
		n, err := maxReceiveCount(out.Attributes[string(types.QueueAttributeNameRedrivePolicy)])
		if err != nil {
			return nil, fmt.Errorf("sqs: open %s: %w", cfg.QueueURL, err)
		}
		if n > 0 && n < MinMaxReceiveCount(cfg.MaxAttempts) {
			return nil, fmt.Errorf("sqs: open %s: the queue's redrive maxReceiveCount %d would dead-letter at the broker "+
				"before seqbox does; with Config.MaxAttempts %d it must be at least %d (or no redrive policy)",
				cfg.QueueURL, n, cfg.MaxAttempts, MinMaxReceiveCount(cfg.MaxAttempts))
		}
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Transport{cfg: cfg, lease: time.Duration(secs) * time.Second, stop: stop, cancel: cancel}, nil
}

// maxReceiveCount reads a redrive policy's maxReceiveCount (0 without a
// policy). SQS writes it as a number, goaws as a string.
func maxReceiveCount(policy string) (int, error) {
	if policy == "" {
		return 0, nil
	}
	var p struct {
		MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return 0, fmt.Errorf("redrive policy %q: %w", policy, err)
	}
	var s string
	if json.Unmarshal(p.MaxReceiveCount, &s) != nil {
		s = string(p.MaxReceiveCount)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("redrive policy %q: maxReceiveCount: %w", policy, err)
	}
	return n, nil
}

// Lease is the queue's visibility timeout, read at Open: how long a
// received message stays with this member unless it is extended. Set the
// consumer's ExtendEvery below it.
func (t *Transport) Lease() time.Duration { return t.lease }

// Receive returns up to limit deliveries. It long-polls for Config.WaitTime
// when nothing is ready, and fills a batch larger than ten (SQS's limit
// per call) with further calls only while each returns a full page.
func (t *Transport) Receive(ctx context.Context, limit int) ([]transport.Delivery, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, transport.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.stop, cancel)()
	limit = max(limit, 1)
	var out []transport.Delivery
	deadline := time.Now().Add(t.cfg.WaitTime)
	wait := int32(t.cfg.WaitTime / time.Second)
	for len(out) < limit {
		n := min(limit-len(out), maxBatch)
		ms, err := t.receive(ctx, n, wait)
		if err != nil {
			if len(out) > 0 {
				return out, nil // what was received stays leased to the caller
			}
			if t.stop.Err() != nil {
				return nil, transport.ErrClosed
			}
			return nil, err
		}
		for _, m := range ms {
			out = append(out, t.delivery(m))
		}
		if len(out) > 0 && len(ms) < n {
			break // not a full page: nothing more is ready right now
		}
		if len(out) == 0 {
			// An empty answer before the wait was over (goaws answers at
			// once while the only visible messages belong to locked
			// groups): look again shortly, until the wait is used up.
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				if t.stop.Err() != nil {
					return nil, transport.ErrClosed
				}
				return nil, ctx.Err()
			case <-time.After(min(left, 100*time.Millisecond)):
			}
		}
		wait = 0
	}
	return out, nil
}

// receive makes one ReceiveMessage call.
func (t *Transport) receive(ctx context.Context, n int, wait int32) ([]types.Message, error) {
	res, err := t.cfg.Client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(t.cfg.QueueURL),
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp},
		MessageAttributeNames:       traceAttributes,
	})
	if err != nil {
		return nil, fmt.Errorf("sqs: receive from %s: %w", t.cfg.QueueURL, err)
	}
	return res.Messages, nil
}

// Close stops the transport: receives in flight return, later ones fail
// with transport.ErrClosed. Deliveries in flight are left as they are:
// unless they are settled (settling still works after Close), they come
// back to another member when their visibility timeout ends.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.cancel()
	return nil
}

// AckBatch deletes the deliveries with DeleteMessageBatch, ten per call.
// Deliveries whose receipt handle is no longer valid are reported with
// transport.ErrLeaseLost; the others are deleted.
func (t *Transport) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	var errs []error
	var own []*delivery
	for _, d := range ds {
		if sd, ok := d.(*delivery); ok && sd.t.cfg.QueueURL == t.cfg.QueueURL {
			own = append(own, sd)
		} else if err := d.Ack(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for len(own) > 0 {
		n := min(len(own), maxBatch)
		errs = append(errs, t.deleteBatch(ctx, own[:n]))
		own = own[n:]
	}
	return errors.Join(errs...)
}

// deleteBatch deletes up to ten deliveries in one call.
func (t *Transport) deleteBatch(ctx context.Context, ds []*delivery) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(ds))
	for i, d := range ds {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(d.handle)}
	}
	out, err := t.cfg.Client.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(t.cfg.QueueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("sqs: delete %d messages: %w", len(ds), err)
	}
	answered := make([]bool, len(ds))
	for _, e := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(e.Id)); err == nil && i >= 0 && i < len(ds) {
			answered[i] = true
		}
	}
	var errs []error
	for _, e := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(e.Id))
		if err != nil || i < 0 || i >= len(ds) {
			continue
		}
		answered[i] = true
		errs = append(errs, ds[i].fail("delete", batchEntryError(e)))
	}
	for i, d := range ds {
		if !answered[i] {
			// goaws leaves an entry it did not delete out of both lists;
			// a DeleteMessage of its own tells why.
			errs = append(errs, d.Ack(ctx))
		}
	}
	return errors.Join(errs...)
}
