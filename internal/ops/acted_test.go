package ops

import (
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// A redrive's own message is judged by its last result: retried and then
// dead-lettered failed again (the CLI exits 1), retried and then applied
// did not, and a rejected envelope (no identity) failed again. Before,
// only the first result counted: a redrive that retried and then
// dead-lettered exited 0, one that retried and applied said "failed
// again", and a rejected one exited 0.
func TestRedriveIsJudgedByItsOwnMessagesLastResult(t *testing.T) {
	res := func(id string, o seqboxtype.Outcome) seqboxtype.Result {
		return seqboxtype.Result{Source: "crm", ID: id, Outcome: o}
	}
	for _, c := range []struct {
		name        string
		results     []seqboxtype.Result
		failedAgain bool
		verb        string
	}{
		{"retried then dead-lettered", []seqboxtype.Result{res("e1", seqboxtype.Retry), res("e1", seqboxtype.DeadLettered)}, true, "ran, and failed again"},
		{"retried then applied", []seqboxtype.Result{res("e1", seqboxtype.Retry), res("e1", seqboxtype.Applied)}, false, "done"},
		{"applied, a successor dead-lettered", []seqboxtype.Result{res("e1", seqboxtype.Applied), res("e2", seqboxtype.DeadLettered)}, false, "done"},
		{"rejected without identity", []seqboxtype.Result{{Outcome: seqboxtype.Rejected}}, true, "ran, and failed again"},
		// It said "ran, and failed again" and exited 0: a message that waits
		// (another redrive has it, its call is in flight) has not failed.
		{"left waiting", []seqboxtype.Result{res("e1", seqboxtype.Retry)}, false, "ran; its message waits to be tried again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Acted{Action: store.ActionRedrive, Target: "1", Results: c.results}
			require.Equal(t, c.failedAgain, a.FailedAgain())
			require.Contains(t, ActionSentence(a), "redrive of dead letter 1 "+c.verb+":")
		})
	}
	require.False(t, Acted{Action: store.ActionSkip, Target: "1", Results: []seqboxtype.Result{res("e1", seqboxtype.DeadLettered)}}.FailedAgain(),
		"only a redrive fails again")
}
