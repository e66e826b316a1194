package seqbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
)

// DeliverBatch applies several messages in one transaction (one fsync),
// each decided as if delivered alone and in order: here a version that
// arrives before its predecessor is held, then unparked when the
// predecessor applies later in the same batch.
func ExampleConsumer_DeliverBatch() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "orders", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error { return nil },
	})
	if err != nil {
		panic(err)
	}
	msg := func(id string, v int) []byte {
		return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s","source":"shop","type":"order.changed","partitionkey":"order-7","objectversion":%d}`, id, v)
	}
	out, err := consumer.DeliverBatch(ctx, [][]byte{msg("e1", 1), msg("e3", 3), msg("e2", 2), msg("e1", 1)})
	if err != nil {
		panic(err)
	}
	for _, results := range out {
		for _, res := range results {
			fmt.Println(res.ID, res.Outcome)
		}
	}
	// Output:
	// e1 applied
	// e3 held
	// e2 applied
	// e3 applied
	// e1 duplicate
}

// DeliverTx runs the pipeline inside a transaction the caller owns, e.g.
// a webhook handler that records the request in the same transaction: the
// identity, the effect and the caller's own rows commit together.
func ExampleConsumer_DeliverTx() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE webhook_log (body TEXT)`); err != nil {
		panic(err)
	}
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "webhooks", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error { return nil },
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"specversion":"1.0","id":"wh-1","source":"stripe","type":"charge.succeeded"}`)
	for range 2 { // the sender retries after a timeout
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		results, err := consumer.DeliverTx(ctx, tx, body, 1)
		if err != nil {
			tx.Rollback()
			panic(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_log VALUES ($1)`, string(results[0].Outcome)); err != nil {
			tx.Rollback()
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
		fmt.Println(results[0].Outcome)
	}
	// Output:
	// applied
	// duplicate
}

// A BatchHandler writes the effects of a whole batch with one statement:
// it gets the events that passed every gate, each key's in version order
// (o-1 v3 arrives early, waits, and follows v2). Duplicates and stale
// versions never reach it.
func ExampleBatchHandler() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE shipments (order_id TEXT, version INTEGER)`); err != nil {
		panic(err)
	}
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "shipping", Store: st,
		BatchHandler: func(ctx context.Context, tx seqbox.Tx, evs []seqboxtype.Event) error {
			q := `INSERT INTO shipments (order_id, version) VALUES `
			var args []any
			for i, ev := range evs {
				if i > 0 {
					q += ", "
				}
				q += "(?, ?)"
				args = append(args, ev.PartitionKey, *ev.ObjectVersion)
			}
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
	})
	if err != nil {
		panic(err)
	}
	msg := func(order string, v int) []byte {
		return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-%d","source":"shop","type":"order.packed","partitionkey":"%s","objectversion":%d}`, order, v, order, v)
	}
	if _, err := consumer.DeliverBatch(ctx, [][]byte{msg("o-1", 1), msg("o-1", 3), msg("o-2", 1), msg("o-1", 2), msg("o-2", 1)}); err != nil {
		panic(err)
	}
	rows, err := st.DB().QueryContext(ctx, `SELECT order_id, version FROM shipments ORDER BY rowid`)
	if err != nil {
		panic(err)
	}
	defer rows.Close()
	for rows.Next() {
		var order string
		var v int
		if err := rows.Scan(&order, &v); err != nil {
			panic(err)
		}
		fmt.Println(order, v)
	}
	// Output:
	// o-1 1
	// o-2 1
	// o-1 2
	// o-1 3
}
