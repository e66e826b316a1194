package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/seqbox/seqbox/internal/broker/sqsclient"
	sqstr "github.com/seqbox/seqbox/transport/sqs"
)

// sqsBroker is an SQS endpoint: a FIFO queue per scenario.
type sqsBroker struct {
	endpoint, run string
	client        *awssqs.Client
	n             int
}

// dialSQS checks that the endpoint e.Addr answers.
func dialSQS(ctx context.Context, e Endpoint) (*sqsBroker, error) {
	client := sqsclient.Client(e.Addr)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client.ListQueues(lctx, &awssqs.ListQueuesInput{}); err != nil {
		return nil, fmt.Errorf("sqs %s: %w", e.Addr, err)
	}
	return &sqsBroker{endpoint: e.Addr, run: e.Run, client: client}, nil
}

func (b *sqsBroker) open(ctx context.Context, lease time.Duration) (queue, error) {
	b.n++
	name := fmt.Sprintf("chaos-%s%d.fifo", b.run, b.n)
	url, _, err := sqsclient.CreateQueue(ctx, b.client, name, sqsclient.Queue{VisibilityTimeout: lease.Round(time.Second)})
	if err != nil {
		return nil, err
	}
	pub, err := sqstr.NewPublisher(b.client, url)
	if err != nil {
		return nil, err
	}
	return &sqsQueue{pub: pub, client: b.client, endpoint: b.endpoint, url: url}, nil
}

// Close holds nothing: the client has no connection to close.
func (b *sqsBroker) Close() error { return nil }

type sqsQueue struct {
	pub      *sqstr.Publisher
	client   *awssqs.Client
	endpoint string
	url      string
}

// PublishBatch publishes the valid events through the publisher and the
// invalid ones raw, in a group of their own.
func (q *sqsQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(ctx context.Context, body []byte) error {
		sum := sha256.Sum256(body)
		_, err := q.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q.url, MessageBody: aws.String(string(body)),
			MessageGroupId: aws.String("invalid"), MessageDeduplicationId: aws.String(hex.EncodeToString(sum[:]))})
		return err
	})
}

// Pending is what the queue holds: visible and in flight.
func (q *sqsQueue) Pending(ctx context.Context) (int, error) {
	out, err := q.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &q.url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		v, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			return 0, fmt.Errorf("sqs %s: %q", name, out.Attributes[string(name)])
		}
		n += v
	}
	return n, nil
}

func (q *sqsQueue) Args() []string {
	return []string{"--transport", "sqs", "--broker", q.endpoint, "--topic", q.url}
}

func (q *sqsQueue) Close() error { return nil }
