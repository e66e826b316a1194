package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// The message attributes a Publisher sets, for routing and filtering
// without parsing the body.
const (
	AttrID            = "ce-id"
	AttrSource        = "ce-source"
	AttrType          = "ce-type"
	AttrPartitionKey  = "seqbox-partition-key"
	AttrObjectVersion = "seqbox-object-version"
)

// maxBatchBytes is SQS's limit on the total size of one SendMessageBatch
// (the smallest across regions and queue settings).
const maxBatchBytes = 256 << 10

// Publisher publishes structured-mode CloudEvents to an SQS queue, body
// unchanged. On a FIFO queue (URL ending in ".fifo") it sets
// MessageGroupId from the partition key and MessageDeduplicationId from
// the identity.
type Publisher struct {
	client   *awssqs.Client
	queueURL string
	fifo     bool
}

var _ transport.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher to the queue at queueURL.
func NewPublisher(client *awssqs.Client, queueURL string) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("sqs: NewPublisher: client is required")
	}
	if queueURL == "" {
		return nil, errors.New("sqs: NewPublisher: queueURL is required")
	}
	return &Publisher{client: client, queueURL: queueURL, fifo: strings.HasSuffix(queueURL, ".fifo")}, nil
}

// Publish sends one event. A body that is not a valid CloudEvent is
// refused with seqboxtype.ParseEvent's error and nothing is sent.
func (p *Publisher) Publish(ctx context.Context, body []byte) error {
	ev, err := seqboxtype.ParseEvent(body)
	if err != nil {
		return err
	}
	m := p.entry(ev, "0")
	_, err = p.client.SendMessage(ctx, &awssqs.SendMessageInput{
		QueueUrl: aws.String(p.queueURL), MessageBody: m.MessageBody, MessageAttributes: m.MessageAttributes,
		MessageGroupId: m.MessageGroupId, MessageDeduplicationId: m.MessageDeduplicationId,
	})
	if err != nil {
		return fmt.Errorf("sqs: publish %s %s: %w", ev.Source, ev.ID, err)
	}
	return nil
}

// PublishBatch sends events in order, with SendMessageBatch (ten per
// call, within SQS's size limit). Every body is validated first: one
// invalid event and nothing is sent. When a call fails, the events before
// it were sent and the error says which one failed; publishing them all
// again is safe within the deduplication window.
func (p *Publisher) PublishBatch(ctx context.Context, bodies [][]byte) error {
	evs := make([]seqboxtype.Event, len(bodies))
	for i, b := range bodies {
		ev, err := seqboxtype.ParseEvent(b)
		if err != nil {
			return fmt.Errorf("sqs: publish batch: event %d: %w", i, err)
		}
		evs[i] = ev
	}
	for len(evs) > 0 {
		var entries []types.SendMessageBatchRequestEntry
		size := 0
		for _, ev := range evs {
			e := p.entry(ev, strconv.Itoa(len(entries)))
			n := entrySize(e)
			if len(entries) == maxBatch || (len(entries) > 0 && size+n > maxBatchBytes) {
				break
			}
			entries, size = append(entries, e), size+n
		}
		out, err := p.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
		if err != nil {
			return fmt.Errorf("sqs: publish batch of %d from %s %s: %w", len(entries), evs[0].Source, evs[0].ID, err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			return fmt.Errorf("sqs: publish batch: %d of %d failed, first %s %s: %w",
				len(out.Failed), len(entries), evs[i].Source, evs[i].ID, batchEntryError(f))
		}
		evs = evs[len(entries):]
	}
	return nil
}

// entry is ev as a batch entry (Id is its position in the call).
func (p *Publisher) entry(ev seqboxtype.Event, id string) types.SendMessageBatchRequestEntry {
	attrs := map[string]types.MessageAttributeValue{
		AttrID:     {DataType: aws.String("String"), StringValue: aws.String(ev.ID)},
		AttrSource: {DataType: aws.String("String"), StringValue: aws.String(ev.Source)},
		AttrType:   {DataType: aws.String("String"), StringValue: aws.String(ev.Type)},
	}
	if ev.PartitionKey != "" {
		attrs[AttrPartitionKey] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(ev.PartitionKey)}
	}
	if v, ok := ev.Version(); ok {
		attrs[AttrObjectVersion] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(v, 10))}
	}
	if ev.TraceParent != "" {
		attrs[transport.HeaderTraceParent] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(ev.TraceParent)}
		if ev.TraceState != "" {
			attrs[transport.HeaderTraceState] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(ev.TraceState)}
		}
	}
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(ev.Raw)), MessageAttributes: attrs}
	if p.fifo {
		e.MessageGroupId = aws.String(MessageGroupID(ev))
		e.MessageDeduplicationId = aws.String(DeduplicationID(ev))
	}
	return e
}

// entrySize is what an entry counts against SQS's size limits.
func entrySize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for k, v := range e.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

// MessageGroupID is the FIFO message group of ev: its partition key (its
// id when it has none), as is when SQS accepts it (1 to 128 printable
// ASCII characters), else "sha256-" and the key's hex SHA-256, so one key
// always maps to one group.
func MessageGroupID(ev seqboxtype.Event) string {
	key := ev.PartitionKey
	if key == "" {
		key = ev.ID
	}
	if len(key) <= 128 && !strings.ContainsFunc(key, func(r rune) bool { return r < '!' || r > '~' }) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// DeduplicationID is the FIFO deduplication id of ev: the hex SHA-256 of
// its identity (source and id, length-prefixed so no two identities
// share it) and its payload hash (seqboxtype.Event.Hash), 64 characters,
// within SQS's 128. A retried send of the same event is dropped; the same
// id with a different payload is a collision, not a retry: it is stored,
// so the consumer's inbox records the collision instead of SQS hiding it.
func DeduplicationID(ev seqboxtype.Event) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(ev.Source), ev.Source, len(ev.ID), ev.ID, ev.Hash))
	return hex.EncodeToString(sum[:])
}
