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

// The seed's order PED-4821: created (version 1), then cancelled (version
// 3), then a late address change (version 2) from an old integration. The
// cancellation is held until version 2 arrives; version 2 then applies and
// the held cancellation follows in the same transaction, so the order ends
// cancelled at version 3 and never goes back.
func ExampleConsumer_Deliver_outOfOrder() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "seqbox-ordering-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	st, err := sqlite.Open(ctx, filepath.Join(dir, "seqbox.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, state TEXT, version BIGINT)`); err != nil {
		panic(err)
	}

	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name:  "order-agent",
		Store: st,
		// The object's state is the last applied event's type at its
		// version, written in the inbox transaction.
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			v, _ := ev.Version()
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, state, version) VALUES ($1, $2, $3)
				ON CONFLICT (id) DO UPDATE SET state = excluded.state, version = excluded.version`,
				ev.PartitionKey, ev.Type, v)
			return err
		},
	})
	if err != nil {
		panic(err)
	}

	arrivals := []string{
		`{"specversion":"1.0","id":"EVT-9001","source":"erp_pedidos","type":"pedido_criado","partitionkey":"PED-4821","objectversion":1,"time":"2026-09-25T10:00:00Z"}`,
		`{"specversion":"1.0","id":"EVT-9087","source":"erp_pedidos","type":"pedido_cancelado","partitionkey":"PED-4821","objectversion":3,"time":"2026-09-25T10:03:00Z"}`,
		`{"specversion":"1.0","id":"EVT-9050","source":"erp_pedidos","type":"endereco_alterado","partitionkey":"PED-4821","objectversion":2,"time":"2026-09-25T10:05:00Z"}`,
	}
	for _, msg := range arrivals {
		results, err := consumer.Deliver(ctx, []byte(msg), 1)
		if err != nil {
			panic(err)
		}
		for _, res := range results {
			fmt.Printf("%s v%d %s\n", res.ID, *res.ObjectVersion, res.Outcome)
		}
	}

	var state string
	var version int64
	if err := st.DB().QueryRow(`SELECT state, version FROM orders WHERE id = 'PED-4821'`).Scan(&state, &version); err != nil {
		panic(err)
	}
	fmt.Printf("PED-4821: %s at version %d\n", state, version)
	// Output:
	// EVT-9001 v1 applied
	// EVT-9087 v3 held
	// EVT-9050 v2 applied
	// EVT-9087 v3 applied
	// PED-4821: pedido_cancelado at version 3
}
