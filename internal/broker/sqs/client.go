package sqs

import (
	"context"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/seqbox/seqbox/internal/broker/sqsclient"
)

// The client side lives in internal/broker/sqsclient, which links no goaws
// (the seqbox binary uses it); these names keep it at hand beside the
// server.

// AccountID is the account goaws puts in queue URLs and ARNs.
const AccountID = sqsclient.AccountID

// Queue configures CreateQueue.
type Queue = sqsclient.Queue

// Client returns an SQS client for the goaws server at endpoint (a
// Server's Endpoint): see sqsclient.Client.
func Client(endpoint string) *awssqs.Client { return sqsclient.Client(endpoint) }

// CreateQueue creates the queue name and returns its URL and ARN: see
// sqsclient.CreateQueue.
func CreateQueue(ctx context.Context, c *awssqs.Client, name string, q Queue) (url, arn string, err error) {
	return sqsclient.CreateQueue(ctx, c, name, q)
}

// NewQueueName returns a queue name no other caller in the process gets:
// see sqsclient.NewQueueName.
func NewQueueName(prefix string, fifo bool) string { return sqsclient.NewQueueName(prefix, fifo) }
