// Command quickstart is the README's quick start: an application's own
// SQLite database, a consumer whose handler creates a CRM task in the
// inbox transaction, and one message delivered twice.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
)

func main() {
	ctx := context.Background()

	// The application's own database: seqbox adopts it and adds only its
	// seqbox_ tables, so the inbox and your tables share one transaction.
	st, err := sqlite.Open(ctx, "app.db")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS crm_tasks (
		opportunity TEXT NOT NULL, title TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name:  "crm-followup", // part of every identity; the CLI's --consumer
		Store: st,
		// Write your effect with tx: it commits with the inbox identity,
		// or not at all.
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks (opportunity, title) VALUES ($1, $2)`,
				ev.PartitionKey, "follow up on "+ev.Type)
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	// One CloudEvent: partitionkey is the business object, objectversion
	// its version, businesskey the effect it asks for.
	msg := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"meeting.held",` +
		`"partitionkey":"opp-2481","objectversion":41,"businesskey":"followup:opp-2481:meeting-184",` +
		`"data":{"meeting":184}}`)

	// The queue delivers it twice: the first worker committed, then lost
	// its ACK.
	for attempt := 1; attempt <= 2; attempt++ {
		results, err := consumer.Deliver(ctx, msg, attempt)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("delivery %d: %s\n", attempt, results[0].Outcome)
	}

	var tasks int
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM crm_tasks`).Scan(&tasks); err != nil {
		log.Fatal(err)
	}
	fmt.Println("crm_tasks rows:", tasks)
}
