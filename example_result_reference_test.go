package seqbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// A handler names what its effect produced; the inbox keeps the name with
// the identity, so a copy delivered again is a duplicate of a known
// result (`seqbox inbox show crm evt-482` prints it too).
func ExampleSetResultReference() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE crm_tasks (id INTEGER PRIMARY KEY, opportunity TEXT)`); err != nil {
		panic(err)
	}
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-followup", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			var task int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO crm_tasks (opportunity) VALUES ($1) RETURNING id`, ev.PartitionKey).Scan(&task); err != nil {
				return err
			}
			return seqbox.SetResultReference(ctx, fmt.Sprintf("crm-task-%d", task))
		},
	})
	if err != nil {
		panic(err)
	}
	msg := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"followup.requested","partitionkey":"opp-2481"}`)
	for range 2 {
		results, err := consumer.Deliver(ctx, msg, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(results[0].Outcome)
	}
	row, err := st.Executor().InboxGet(ctx, store.MessageRef{Consumer: "crm-followup", Source: "crm", ID: "evt-482"})
	if err != nil {
		panic(err)
	}
	fmt.Println("result:", row.ResultReference)
	// Output:
	// applied
	// duplicate
	// result: crm-task-1
}
