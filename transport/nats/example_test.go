package nats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	natstr "github.com/seqbox/seqbox/transport/nats"

	"github.com/nats-io/nats-server/v2/server"
)

// A producer publishes two versions of an order, and retries the first
// publication; JetStream drops the retry by its Nats-Msg-Id. A seqbox
// consumer on the durable pull consumer applies each version once, in
// order, inside its SQLite transaction, and acknowledges after COMMIT.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-nats-example-")
	defer os.RemoveAll(dir)

	// An in-process NATS server with JetStream: in production, URL is
	// your server's.
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: filepath.Join(dir, "jetstream"), NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic(errors.New("nats server not ready"))
	}
	cfg := natstr.Config{URL: srv.ClientURL(), Stream: "ORDERS", Subject: "orders.events"}

	pub, err := natstr.NewPublisher(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	v1 := []byte(`{"specversion":"1.0","id":"evt-1","source":"erp","type":"order.placed","partitionkey":"PED-4821","objectversion":1}`)
	v2 := []byte(`{"specversion":"1.0","id":"evt-2","source":"erp","type":"order.paid","partitionkey":"PED-4821","objectversion":2}`)
	for _, body := range [][]byte{v1, v1, v2} {
		if err := pub.Publish(ctx, body); err != nil {
			panic(err)
		}
	}

	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, state TEXT)`); err != nil {
		panic(err)
	}
	tr, err := natstr.Open(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "orders", Store: st, Transport: tr,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET state = excluded.state`,
				ev.PartitionKey, ev.Type)
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
	var state string
	_ = st.DB().QueryRow(`SELECT state FROM orders WHERE id = 'PED-4821'`).Scan(&state)
	fmt.Println("PED-4821:", state)
	// Output:
	// evt-1 applied
	// evt-2 applied
	// PED-4821: order.paid
}
