package seqbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Issue 36, classes 8 and 9, in the library: an event from a broker
// with a number the payload hash cannot hold exactly, or with a control
// character in a key, is rejected naming the field. Before, the amounts
// 12345678901234567890 and 12345678901234567891 under one identity were
// applied and then a duplicate (one hash), and a partitionkey holding
// CR LF was applied like any other.
func TestUnsendableInputIsRejectedNamingTheField(t *testing.T) {
	b := setup(t)
	c := b.consumer(t)
	for _, tt := range []struct{ raw, field string }{
		{`{"id":"pay-1","source":"s","type":"t","data":{"amount":12345678901234567890}}`, "data.amount"},
		{`{"id":"pay-1","source":"s","type":"t","data":{"amount":12345678901234567891}}`, "data.amount"},
		{`{"id":"pay-2","source":"s","type":"t","data":{"items":[1,2,9007199254740993]}}`, "data.items[2]"},
		{`{"id":"k-1","source":"s","type":"t","partitionkey":"PED\r\n4821"}`, "partitionkey"},
		{`{"id":"k-2","source":"s","type":"t","businesskey":"x\u007f"}`, "businesskey"},
	} {
		results, err := c.Deliver(context.Background(), []byte(tt.raw), 1)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.Rejected, results[0].Outcome, "%s: %s", tt.raw, results[0].Reason)
		require.Contains(t, results[0].Reason, tt.field+": ", tt.raw)
	}
	require.Zero(t, b.effects(t, ""), "nothing applied")

	// Every spelling of an exact value is one fact: a duplicate.
	for i, amount := range []string{"25", "25.0", "2.5e1"} {
		results, err := c.Deliver(context.Background(), []byte(`{"id":"ok","source":"s","type":"t","data":{"amount":`+amount+`}}`), 1)
		require.NoError(t, err)
		want := seqboxtype.Duplicate
		if i == 0 {
			want = seqboxtype.Applied
		}
		require.Equal(t, want, results[0].Outcome, "%s: %s", amount, results[0].Reason)
	}
}
