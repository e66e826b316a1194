// Package sqsclient is the client side of internal/broker/sqs, without the
// goaws server: an SQS client for an endpoint that speaks the AWS Query
// protocol (goaws, and so also real SQS) and queue creation, for the
// chaos harness and its worker processes, which the seqbox binary links.
package sqsclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
)

// AccountID is the account goaws puts in queue URLs and ARNs.
const AccountID = "000000000000"

// Client returns an SQS client for the server at endpoint (for goaws, a
// Server's Endpoint, reachable from any process): static credentials,
// region us-east-1, and the AWS Query protocol. The SDK speaks the JSON
// protocol to SQS by default, and goaws v0.4.5 answers that with 400 Bad
// Request; real SQS accepts both.
func Client(endpoint string) *awssqs.Client {
	creds := aws.Credentials{AccessKeyID: "seqbox", SecretAccessKey: "seqbox", Source: "seqbox goaws"}
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
	}, func(o *awssqs.Options) { o.Protocol = awsquery.New(schemas.AmazonSQS) })
}

// Queue configures CreateQueue.
type Queue struct {
	// VisibilityTimeout is the lease of a received message, in whole
	// seconds (goaws's unit). Default 30s.
	VisibilityTimeout time.Duration
	// MaxReceiveCount, when positive, gives the queue a redrive policy to
	// DeadLetterQueueARN after that many returns to visibility.
	MaxReceiveCount int
	// DeadLetterQueueARN is the redrive target; required with
	// MaxReceiveCount.
	DeadLetterQueueARN string
}

// CreateQueue creates the queue name (a FIFO queue when it ends in
// ".fifo") and returns its URL and ARN.
func CreateQueue(ctx context.Context, c *awssqs.Client, name string, q Queue) (url, arn string, err error) {
	if q.VisibilityTimeout <= 0 {
		q.VisibilityTimeout = 30 * time.Second
	}
	if q.VisibilityTimeout%time.Second != 0 {
		return "", "", fmt.Errorf("goaws: Queue.VisibilityTimeout %s is not whole seconds", q.VisibilityTimeout)
	}
	attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(int(q.VisibilityTimeout / time.Second))}
	if q.MaxReceiveCount > 0 {
		if q.DeadLetterQueueARN == "" {
			return "", "", fmt.Errorf("goaws: Queue.MaxReceiveCount needs Queue.DeadLetterQueueARN")
		}
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"maxReceiveCount":%d,"deadLetterTargetArn":%q}`, q.MaxReceiveCount, q.DeadLetterQueueARN)
	}
	if len(name) > len(".fifo") && name[len(name)-len(".fifo"):] == ".fifo" {
		attrs["FifoQueue"] = "true"
	}
	out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("goaws: create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), "arn:aws:sqs::" + AccountID + ":" + name, nil
}

// NewQueueName returns a queue name no other caller in the process gets:
// prefix, random hex, and ".fifo" when fifo is set.
func NewQueueName(prefix string, fifo bool) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	if fifo {
		name += ".fifo"
	}
	return name
}
