package sqs

import (
	"errors"
	"fmt"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Config configures a Transport. Zero values take the defaults.
type Config struct {
	// Client is the SQS client (required). In production build it with
	// config.LoadDefaultConfig and sqs.NewFromConfig; the transport never
	// closes it.
	Client *awssqs.Client
	// QueueURL is the queue to consume (required): a FIFO queue (its name
	// ends in ".fifo") for per-key order.
	QueueURL string
	// WaitTime is how long an empty Receive long-polls before it returns
	// an empty batch. SQS counts it in whole seconds, from 1s to 20s.
	// Default 1s: the consumer notices shutdown and settles batches
	// quickly.
	WaitTime time.Duration
	// MaxAttempts, when positive, is the consumer's Retry.MaxAttempts:
	// Open then reads the queue's redrive policy and refuses a
	// maxReceiveCount that could dead-letter a message at the broker
	// before seqbox does (see MinMaxReceiveCount).
	MaxAttempts int
}

// CrashLoopFactor is how many times Retry.MaxAttempts a seqbox consumer
// lets a message be delivered without settling before it dead-letters it
// itself (a crash loop: every attempt killed its process).
const CrashLoopFactor = 4

// MinMaxReceiveCount is the smallest redrive maxReceiveCount that lets
// seqbox dead-letter first, with the message's identity, attempts and
// errors in its own DLQ: more receives than the crash-loop guard allows.
func MinMaxReceiveCount(maxAttempts int) int { return CrashLoopFactor*maxAttempts + 1 }

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil {
		return c, errors.New("sqs: Config.Client is required")
	}
	if c.QueueURL == "" {
		return c, errors.New("sqs: Config.QueueURL is required")
	}
	if c.WaitTime == 0 {
		c.WaitTime = time.Second
	}
	if c.WaitTime < time.Second || c.WaitTime > 20*time.Second || c.WaitTime%time.Second != 0 {
		return c, fmt.Errorf("sqs: Config.WaitTime %s: want whole seconds from 1s to 20s", c.WaitTime)
	}
	if c.MaxAttempts < 0 {
		return c, fmt.Errorf("sqs: Config.MaxAttempts %d is negative", c.MaxAttempts)
	}
	return c, nil
}
