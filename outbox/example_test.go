package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
)

// A billing consumer emits "invoice.created" in the same transaction that
// applies "order.confirmed"; the relay publishes it after commit to the
// queue a downstream consumer reads.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-outbox-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "seqbox.db")
	st, _ := sqlite.Open(ctx, path)
	defer st.Close()
	downstream, _ := embedded.Open(ctx, path, embedded.Config{Name: "invoices"})
	defer downstream.Close()

	billing, _ := seqbox.NewConsumer(seqbox.Config{Name: "billing", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			invoice := fmt.Sprintf(`{"specversion":"1.0","id":"inv-for-%s","source":"billing","type":"invoice.created","partitionkey":%q}`,
				ev.ID, ev.PartitionKey)
			return outbox.Emit(ctx, tx, []byte(invoice))
		}})
	order := []byte(`{"specversion":"1.0","id":"evt-1","source":"shop","type":"order.confirmed","partitionkey":"PED-4821"}`)
	billing.Deliver(ctx, order, 1)
	billing.Deliver(ctx, order, 2) // a redelivery emits nothing more

	relay, _ := outbox.NewRelay(st, downstream, outbox.Config{})
	n, err := relay.RunOnce(ctx)
	fmt.Println("published:", n, err)

	ds, _ := downstream.Receive(ctx, 10)
	for _, d := range ds {
		fmt.Println(string(d.Body()))
	}
	// Output:
	// published: 1 <nil>
	// {"specversion":"1.0","id":"inv-for-evt-1","source":"billing","type":"invoice.created","partitionkey":"PED-4821"}
}
