// Command crm-followup is seed 003's follow-up agent: an opportunity's
// events arrive as versions 41 (proposal sent), 42 (customer replied) and
// 43 (opportunity won), and after 43 an integration republishes version 41
// under a new id. The version gate refuses it: no new follow-up task, no
// message to the customer, and the audit says which event was refused and
// which state made it invalid.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

func main() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "crm.db")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS followups (
		opportunity TEXT PRIMARY KEY, state TEXT NOT NULL, version BIGINT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS seller_inbox (opportunity TEXT, note TEXT)`); err != nil {
		log.Fatal(err)
	}

	agent, err := seqbox.NewConsumer(seqbox.Config{Name: "followup-agent", Store: st, Handler: followUp})
	if err != nil {
		log.Fatal(err)
	}
	events := []string{
		`{"specversion":"1.0","id":"evt-41","source":"crm","type":"proposta_enviada","partitionkey":"opp-2481","objectversion":41}`,
		`{"specversion":"1.0","id":"evt-42","source":"crm","type":"cliente_respondeu","partitionkey":"opp-2481","objectversion":42}`,
		`{"specversion":"1.0","id":"evt-43","source":"crm","type":"oportunidade_ganha","partitionkey":"opp-2481","objectversion":43}`,
		// An integration republishes version 41 after 43, under a new id.
		`{"specversion":"1.0","id":"sync-7731","source":"crm","type":"proposta_enviada","partitionkey":"opp-2481","objectversion":41}`,
	}
	for _, e := range events {
		results, err := agent.Deliver(ctx, []byte(e), 1)
		if err != nil {
			log.Fatal(err)
		}
		res := results[0]
		fmt.Printf("%-9s v%d: %s", res.ID, *res.ObjectVersion, res.Outcome)
		if res.Reason != "" {
			fmt.Printf(" (%s)", res.Reason)
		}
		fmt.Println()
	}
	var state string
	var version int64
	if err := st.DB().QueryRowContext(ctx, `SELECT state, version FROM followups WHERE opportunity = 'opp-2481'`).Scan(&state, &version); err != nil {
		log.Fatal(err)
	}
	var notes int
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seller_inbox`).Scan(&notes); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("follow-up for opp-2481: %s at version %d; notes to the seller: %d\n", state, version, notes)

	// The record of what was refused, and which state made it invalid.
	audit, err := st.Executor().AuditList(ctx, store.AuditListParams{Consumer: "followup-agent", Key: "opp-2481", Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range audit {
		fmt.Printf("audit: %s %s received v%d, current v%d: %s; next: %s\n",
			a.ID, a.Outcome, *a.ReceivedVersion, *a.CurrentVersion, a.Reason, a.NextAction)
	}
}

// followUp is the agent's rule for each event type. Every write is in
// the inbox transaction, after the version gate let the event through.
func followUp(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	v, _ := ev.Version()
	var err error
	switch ev.Type {
	case "proposta_enviada": // 41: wait for the customer, follow up later
		_, err = tx.ExecContext(ctx, `INSERT INTO followups (opportunity, state, version) VALUES ($1, 'waiting', $2)
			ON CONFLICT (opportunity) DO UPDATE SET state = 'waiting', version = excluded.version`, ev.PartitionKey, v)
	case "cliente_respondeu": // 42: cancel the automatic message, tell the seller
		if _, err = tx.ExecContext(ctx, `UPDATE followups SET state = 'cancelled', version = $2 WHERE opportunity = $1`, ev.PartitionKey, v); err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO seller_inbox (opportunity, note) VALUES ($1, 'customer replied')`, ev.PartitionKey)
		}
	case "oportunidade_ganha": // 43: the cadence ends
		_, err = tx.ExecContext(ctx, `UPDATE followups SET state = 'closed', version = $2 WHERE opportunity = $1`, ev.PartitionKey, v)
	default:
		err = seqbox.Permanent(fmt.Errorf("unknown event type %q", ev.Type))
	}
	return err
}
