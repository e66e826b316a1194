package sqs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqbox/seqbox"
	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/sqs"
)

// A CloudEvent published twice to an SQS FIFO queue (here goaws on
// loopback) and consumed by a seqbox consumer over SQLite: the queue's
// deduplication drops the second copy, and the inbox would catch any copy
// that got past it.
func Example() {
	ctx := context.Background()
	srv, err := broker.Start(broker.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := broker.Client(srv.Endpoint())
	url, _, err := broker.CreateQueue(ctx, client, broker.NewQueueName("crm", true), broker.Queue{VisibilityTimeout: 30 * time.Second})
	if err != nil {
		panic(err)
	}

	pub, err := sqs.NewPublisher(client, url)
	if err != nil {
		panic(err)
	}
	ev := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"followup.requested","partitionkey":"opp-2481","objectversion":41}`)
	for range 2 {
		if err := pub.Publish(ctx, ev); err != nil {
			panic(err)
		}
	}

	dir, _ := os.MkdirTemp("", "seqbox-sqs-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "seqbox.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE crm_tasks (opportunity TEXT)`); err != nil {
		panic(err)
	}
	tr, err := sqs.Open(ctx, sqs.Config{Client: client, QueueURL: url, MaxAttempts: 5})
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-followup", Store: st, Transport: tr,
		// Extend the lease well before the queue's visibility timeout.
		ExtendEvery: tr.Lease() / 3, ExtendBy: tr.Lease(),
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 5}},
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks VALUES ($1)`, ev.PartitionKey)
			return err
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.RunUntilIdle(ctx, 2*time.Second); err != nil {
		panic(err)
	}
	var tasks int
	st.DB().QueryRow(`SELECT COUNT(*) FROM crm_tasks`).Scan(&tasks)
	fmt.Println("tasks:", tasks)
	// Output: tasks: 1
}
