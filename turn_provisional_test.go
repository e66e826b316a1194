package seqbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
)

// bothStores are the stores a test of the agent path runs on, each with
// its bundle.
var bothStores = []struct {
	name   string
	bundle func(*testing.T) *bundle
}{{"sqlite", setup}, {"postgres", setupPostgres}}

// A batch's first run inserts its identities as applied until each
// delivery says otherwise. A copy in the batch of a message that holds
// its key's turn elsewhere (being decided by a Deliver of its own, with
// no inbox row yet) then read, to the store, as settled, and its turn as
// stale: an earlier message of the same key in the batch, without an
// objectversion, passed the gate and reached the agent while the turn's
// holder was being asked (the state-machine test found it: "order at
// the agent", seed 17004061918496131439). It must wait, held, behind it.
func TestTurnHolderWhoseCopyIsInTheBatchKeepsTheTurn(t *testing.T) {
	for _, c := range bothStores {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			b := c.bundle(t)
			a := newAgent()
			a.block["e2"] = make(chan struct{})
			b.cfg.Decide = a.decide
			cons := b.consumer(t)
			e1 := []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp"}`)
			e2 := []byte(`{"id":"e2","source":"crm","type":"t","partitionkey":"opp"}`)
			first := make(chan []seqboxtype.Result, 1)
			go func() { first <- mustDeliver(t, cons, e2, 1) }()
			require.Equal(t, "e2", <-a.started, "e2 takes the key's turn and is asked")

			batch := make(chan [][]seqboxtype.Result, 1)
			go func() {
				out, err := cons.DeliverBatch(ctx, [][]byte{e1, e2})
				require.NoError(t, err)
				batch <- out
			}()
			held := func() bool {
				var n int
				err := b.store.DB().QueryRow(`SELECT count(*) FROM seqbox_parked WHERE consumer = $1 AND id = 'e1' AND reason = 'held'`, b.cfg.Name).Scan(&n)
				return err == nil && n > 0
			}
			waitfor.That(t, time.Minute, "e1 held, or asked", func() bool { return held() || len(a.started) > 0 })
			require.Equal(t, []string{"e2"}, a.called(), "e1 reached the agent while e2, which holds its key's turn, was being asked")
			close(a.block["e2"])
			// e2's copies settle (one applies it, the other finds it
			// applied), and e2's commit ends its turn and lets e1 out.
			<-first
			<-batch
			waitfor.That(t, time.Minute, "e1 and e2 applied", func() bool {
				return outcomeOf(t, b, "e1") == "applied" && outcomeOf(t, b, "e2") == "applied"
			})
			require.Equal(t, []string{"e2", "e1"}, a.called(), "the agent, in the key's order")
		})
	}
}

// The same scenario for a business key: a copy in the batch of the
// identity being decided under it must not let another identity of the
// business key in the batch through to the agent. It holds without the
// turn's fix (e1 waits, retry), and guards it.
func TestBusinessKeyHolderWhoseCopyIsInTheBatchKeepsTheKey(t *testing.T) {
	for _, c := range bothStores {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			b := c.bundle(t)
			a := newAgent()
			a.block["e2"] = make(chan struct{})
			b.cfg.Decide = a.decide
			// e1's first result: it waits for e2 (retry), or, asked, it is
			// being decided.
			e1Ran := make(chan seqboxtype.Outcome, 16)
			b.cfg.Observer = func(r seqboxtype.Result) {
				if r.ID == "e1" {
					e1Ran <- r.Outcome
				}
			}
			cons := b.consumer(t)
			e1 := []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp-1","businesskey":"task-7"}`)
			e2 := []byte(`{"id":"e2","source":"crm","type":"t","partitionkey":"opp-2","businesskey":"task-7"}`)
			first := make(chan []seqboxtype.Result, 1)
			go func() { first <- mustDeliver(t, cons, e2, 1) }()
			require.Equal(t, "e2", <-a.started, "e2 takes the business key and is asked")

			batch := make(chan [][]seqboxtype.Result, 1)
			go func() {
				out, err := cons.DeliverBatch(ctx, [][]byte{e1, e2})
				require.NoError(t, err)
				batch <- out
			}()
			require.Equal(t, seqboxtype.Retry, <-e1Ran, "e1 waits for e2")
			require.Equal(t, []string{"e2"}, a.called(), "e1 reached the agent while e2, under the same business key, was being asked")
			close(a.block["e2"])
			<-first
			<-batch
			require.Equal(t, []string{"e2"}, a.called(), "the business key reached the agent once")
		})
	}
}

// The same hole for a consumer without Decide: e2 failed once and holds
// its key's turn (a retry row, no inbox row), then a batch holds e1 (no
// objectversion) and, after it, e2's redelivered copy. e2's copy makes
// its own turn read as stale to the store; e1 must not be applied ahead
// of it.
func TestRetryingMessageWhoseCopyIsInTheBatchKeepsTheTurn(t *testing.T) {
	for _, c := range bothStores {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			b := c.bundle(t)
			var order []string
			failed := false
			b.cfg.Handler = func(_ context.Context, _ seqbox.Tx, ev seqboxtype.Event) error {
				if ev.ID == "e2" && !failed {
					failed = true
					return errors.New("e2 fails once")
				}
				order = append(order, ev.ID)
				return nil
			}
			cons := b.consumer(t)
			e1 := []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp"}`)
			e2 := []byte(`{"id":"e2","source":"crm","type":"t","partitionkey":"opp"}`)
			require.Equal(t, seqboxtype.Retry, mustDeliver(t, cons, e2, 1)[0].Outcome, "e2 fails and holds its key's turn")
			out, err := cons.DeliverBatch(ctx, [][]byte{e1, e2})
			require.NoError(t, err)
			t.Logf("batch: %+v", out)
			require.Equal(t, []string{"e2", "e1"}, order, "the handler, in the key's order")
		})
	}
}
