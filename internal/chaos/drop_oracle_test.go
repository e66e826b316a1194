package chaos

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The dropped-message oracle: a victim whose queue rows were deleted is
// judged dropped (verifyDropped reads its end in the store); one that the
// queue no longer held because seqbox's parked table did (it waited
// behind a blocked key: seed 6 at 200 messages and 20 keys) cannot be
// dropped by any broker, and is judged as any other event, expected
// applied; one that neither held is a failure of the drop.
func TestDropOracleJudgesAParkedVictimAsAnyEvent(t *testing.T) {
	run := func(rows int, parked bool) *serveRun {
		a := &faultyAgent{}
		a.w.init()
		return &serveRun{h: &harness{opt: Options{Progress: discard{}}}, name: dropScenario, agent: a, res: &Result{ExpectedEffects: 1},
			droppedRows: map[string]int{"e00041": rows}, parkedVictims: map[string]bool{"e00041": parked}}
	}
	wl := serveWorkload{victims: map[string]serveEvent{"e00041": {id: "e00041", key: "lead-01", original: true}}}

	s := run(0, true)
	s.verifyDropped(context.Background(), nil, wl, map[string]string{"e00041": "applied"})
	require.Empty(t, s.res.Failures)
	require.Equal(t, 2, s.res.ExpectedEffects, "a parked victim is expected applied, as any event")
	require.True(t, s.notDroppable("e00041"))

	s = run(0, false)
	s.verifyDropped(context.Background(), nil, wl, map[string]string{"e00041": "applied"})
	require.Len(t, s.res.Failures, 1)
	require.Contains(t, s.res.Failures[0], "e00041 was not dropped (its call hung: true, queue rows deleted: 0)")
}
