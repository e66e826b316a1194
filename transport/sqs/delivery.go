package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/seqbox/seqbox/transport"
)

// MaxVisibility is SQS's longest visibility timeout. Nack delays and
// extensions beyond it are clamped to it.
const MaxVisibility = 12 * time.Hour

// delivery is one receipt of one SQS message.
type delivery struct {
	t       *Transport
	body    []byte
	id      string
	handle  string
	attempt int
	attrs   map[string]types.MessageAttributeValue
	sent    time.Time
}

// traceAttributes are the message attributes a receive asks for: the
// W3C trace context of the producer.
var traceAttributes = []string{transport.HeaderTraceParent, transport.HeaderTraceState}

// Header returns the message's string attribute of that name (only the
// trace context is received).
func (d *delivery) Header(name string) string {
	return aws.ToString(d.attrs[name].StringValue)
}

var _ transport.Delivery = (*delivery)(nil)

func (t *Transport) delivery(m types.Message) *delivery {
	attempt, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || attempt < 1 {
		attempt = 1
	}
	d := &delivery{t: t, body: []byte(aws.ToString(m.Body)), id: aws.ToString(m.MessageId),
		handle: aws.ToString(m.ReceiptHandle), attempt: attempt, attrs: m.MessageAttributes}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil && ms > 0 {
		d.sent = time.UnixMilli(ms).UTC()
	}
	return d
}

// PublishedAt implements transport.PublishTimer: the message's
// SentTimestamp (zero when SQS did not give it).
func (d *delivery) PublishedAt() time.Time { return d.sent }

// Body is the message body exactly as published.
func (d *delivery) Body() []byte { return d.body }

// Attempt is the message's ApproximateReceiveCount.
func (d *delivery) Attempt() int { return d.attempt }

// Ack deletes the message (DeleteMessage).
func (d *delivery) Ack(ctx context.Context) error {
	_, err := d.t.cfg.Client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{
		QueueUrl: aws.String(d.t.cfg.QueueURL), ReceiptHandle: aws.String(d.handle)})
	if err != nil {
		return d.fail("delete", err)
	}
	return nil
}

// Nack sets the message's visibility timeout to delay, rounded up to whole
// seconds and clamped to MaxVisibility: 0 makes it visible at once. In a
// FIFO queue the message's group waits for it meanwhile.
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	return d.changeVisibility(ctx, "nack", delay)
}

// Extend sets the message's visibility timeout to by from now, rounded up
// to whole seconds and clamped to MaxVisibility.
func (d *delivery) Extend(ctx context.Context, by time.Duration) error {
	if by <= 0 {
		return fmt.Errorf("sqs: extend message %s by %s: not a positive duration", d.id, by)
	}
	return d.changeVisibility(ctx, "extend", by)
}

func (d *delivery) changeVisibility(ctx context.Context, op string, to time.Duration) error {
	_, err := d.t.cfg.Client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(d.t.cfg.QueueURL), ReceiptHandle: aws.String(d.handle), VisibilityTimeout: visibility(to)})
	if err != nil {
		return d.fail(op, err)
	}
	return nil
}

// visibility is d in whole seconds, rounded up, between 0 and
// MaxVisibility.
func visibility(d time.Duration) int32 {
	d = min(max(d, 0), MaxVisibility)
	return int32((d + time.Second - 1) / time.Second)
}

// fail wraps err from op, as transport.ErrLeaseLost when the receipt
// handle is no longer valid.
func (d *delivery) fail(op string, err error) error {
	if leaseLost(err) {
		return fmt.Errorf("sqs: %s message %s: %w (%v)", op, d.id, transport.ErrLeaseLost, err)
	}
	return fmt.Errorf("sqs: %s message %s: %w", op, d.id, err)
}

// leaseLost reports whether err says the receipt handle no longer names an
// in-flight receipt: the visibility timeout ran out, and the message may
// be with another member.
func leaseLost(err error) bool {
	var invalid *types.ReceiptHandleIsInvalid
	var notInFlight *types.MessageNotInflight
	if errors.As(err, &invalid) || errors.As(err, &notInFlight) {
		return true
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ReceiptHandleIsInvalid", "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight":
		return true
	case "AWS.SimpleQueueService.MessageNotInFlight", "AWS.SimpleQueueService.QueueExists":
		// goaws's answers to ChangeMessageVisibility and DeleteMessage
		// with a receipt handle it no longer knows.
		return true
	case "InvalidParameterValue":
		// SQS FIFO answers a delete or visibility change with an expired
		// handle with this generic code ("Value … for parameter
		// ReceiptHandle is invalid. Reason: The receipt handle has
		// expired."); the message is the only way to tell it from a bad
		// VisibilityTimeout.
		return strings.Contains(ae.ErrorMessage(), "ReceiptHandle")
	}
	return false
}

// batchEntryError is a failed batch entry as an API error.
func batchEntryError(e types.BatchResultErrorEntry) error {
	return &smithy.GenericAPIError{Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)}
}

var (
	_ transport.HeaderCarrier = (*delivery)(nil)
	_ transport.PublishTimer  = (*delivery)(nil)
)
