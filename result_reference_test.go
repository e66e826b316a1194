package seqbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// A handler names what its effect produced (the CRM task it created) with
// SetResultReference; the inbox keeps it with the identity, so that an
// operator reading a duplicate's identity sees what the first copy made.
// A handler that names nothing leaves it empty; a failed delivery keeps
// none of what it named; an unfit reference is the handler's error.
func TestHandlerRecordsItsResultReference(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *bundle{"sqlite": setup, "postgres": setupPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := open(t)
			failOnce := map[string]bool{"r2": true}
			b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
				if ev.ID == "plain" {
					return nil
				}
				if err := seqbox.SetResultReference(ctx, "task-"+ev.ID); err != nil {
					return err
				}
				if failOnce[ev.ID] {
					failOnce[ev.ID] = false
					return errors.New("crm timed out")
				}
				if ev.ID == "bad" {
					return seqbox.SetResultReference(ctx, "x\x00y")
				}
				return nil
			}
			c := b.consumer(t)
			ctx := context.Background()
			last := map[string]seqboxtype.Result{}
			for _, id := range []string{"r1", "r2", "plain", "bad"} {
				raw := fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"crm","type":"t"}`, id)
				for range 2 { // r2 fails once, then applies; the others' second copy is a duplicate
					results, err := c.Deliver(ctx, raw, 1)
					require.NoError(t, err)
					last[id] = results[0]
				}
			}
			ref := func(id string) (string, seqboxtype.Outcome) {
				row, err := b.store.Executor().InboxGet(ctx, store.MessageRef{Consumer: "test", Source: "crm", ID: id})
				require.NoError(t, err, id)
				return row.ResultReference, row.Outcome
			}
			for id, want := range map[string][]any{
				"r1": {"task-r1", seqboxtype.Applied}, "r2": {"task-r2", seqboxtype.Applied}, "plain": {"", seqboxtype.Applied},
			} {
				r, o := ref(id)
				require.Equal(t, want, []any{r, o}, id)
			}
			require.Equal(t, seqboxtype.Retry, last["bad"].Outcome, "an unfit reference fails the delivery")
			require.Contains(t, last["bad"].Reason, "holds a control character")

			// Outside a handler there is nothing to name.
			require.ErrorIs(t, seqbox.SetResultReference(ctx, "x"), seqbox.ErrNotInHandler)
			require.ErrorContains(t, seqbox.SetResultReference(ctx, strings.Repeat("x", 2000)), "result reference of 2000 bytes: the limit is 1024")
		})
	}
}
