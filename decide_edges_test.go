package seqbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Issue 36, class 11: a Decide that returns no output and no error has
// decided (to do nothing special); its message applies, with an empty
// decision, instead of failing on the store's NOT NULL and dead-lettering.
func TestDecideReturningNothingApplies(t *testing.T) {
	b := setup(t)
	var seen []string
	b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) { return nil, nil }
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		d, ok := seqbox.DecisionFrom(ctx)
		seen = append(seen, ev.ID+":"+string(d)+":"+map[bool]string{true: "decided", false: "undecided"}[ok])
		return nil
	}
	c := b.consumer(t)
	results := mustDeliver(t, c, unversioned("e1", "opp"), 1)
	require.Equal(t, []string{"e1:applied"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{"e1::decided"}, seen)
}

// Issue 36, class 11: a panic's reason in the DLQ and the audit is the
// panic and where it happened, on one line, not the whole goroutine
// stack (which goes to the log).
func TestPanicReasonIsOneLine(t *testing.T) {
	for _, where := range []string{"decide", "handler"} {
		t.Run(where, func(t *testing.T) {
			b := setup(t)
			b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) {
				if where == "decide" {
					panic("the model client crashed")
				}
				return []byte("go"), nil
			}
			b.cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error {
				panic("the CRM client crashed")
			}
			c := b.consumer(t)
			results := mustDeliver(t, c, unversioned("e1", "opp"), 1)
			require.Equal(t, []string{"e1:dead_lettered"}, outcomes(results))
			letters, err := b.store.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: b.cfg.Name})
			require.NoError(t, err)
			require.Len(t, letters, 1)
			require.NotContains(t, letters[0].Reason+letters[0].FirstError, "goroutine ")
			for _, text := range []string{results[0].Reason, letters[0].LastError} {
				require.NotContains(t, text, "\n", "one line: %q", text)
				require.NotContains(t, text, "goroutine ")
				require.Contains(t, text, "crashed")
				require.True(t, strings.Contains(text, ".go:"), "names where it panicked: %q", text)
			}
		})
	}
}
