package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/kafka"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A seqbox consumer over a Kafka consumer group: the event is published
// with its partitionkey as the record key, applied once inside the inbox
// transaction, and its offset committed after the COMMIT. The same event
// published again (a producer retry after a timeout) is a duplicate.
func Example() {
	ctx := context.Background()
	// An in-process Kafka (franz-go's kfake) with the topic: in
	// production, Brokers are your cluster's addresses.
	srv, err := kfake.NewCluster(kfake.SeedTopics(4, "crm-events"))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	brokers := srv.ListenAddrs()

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Topic: "crm-events"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	msg := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"followup.requested","partitionkey":"opp-2481","objectversion":41}`)
	for range 2 {
		if err := pub.Publish(ctx, msg); err != nil {
			panic(err)
		}
	}

	tr, err := kafka.Open(ctx, kafka.Config{Brokers: brokers, Topic: "crm-events", Group: "crm-followup"})
	if err != nil {
		panic(err)
	}
	defer tr.Close()

	dir, _ := os.MkdirTemp("", "seqbox-kafka-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "seqbox.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE crm_tasks (opportunity TEXT)`); err != nil {
		panic(err)
	}
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-followup", Store: st, Transport: tr,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks VALUES ($1)`, ev.PartitionKey)
			return err
		},
		Observer: func(res seqboxtype.Result) { fmt.Println(res.ID, res.Outcome) },
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.RunUntilIdle(ctx, time.Second); err != nil {
		panic(err)
	}
	var tasks int
	st.DB().QueryRow(`SELECT COUNT(*) FROM crm_tasks`).Scan(&tasks)
	fmt.Println("tasks:", tasks)
	// Output:
	// evt-482 applied
	// evt-482 duplicate
	// tasks: 1
}
