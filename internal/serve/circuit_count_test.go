package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The circuit opens on circuitThreshold failures IN A ROW (docs/design.md
// §10.3): an agent that fails every other call, one call at a time, is
// not down, and the count starts again after each success. A success that
// did not reset the count opened it after the third failure in all
// (planted-bug table, docs/mutation.md).
func TestCircuitCountsFailuresInARowOnly(t *testing.T) {
	c := newCircuit(time.Now, nil, nil)
	call := func(ok bool) {
		p, err := c.wait(t.Context())
		require.NoError(t, err)
		if ok {
			p.success()
		} else {
			p.failure("503")
		}
	}
	for range 10 {
		call(false)
		call(true)
	}
	open, _ := c.state()
	require.False(t, open, "failures with successes in between opened the circuit")
	for range circuitThreshold - 1 {
		call(false)
	}
	open, _ = c.state()
	require.False(t, open)
	call(false)
	open, _ = c.state()
	require.True(t, open, "%d failures in a row", circuitThreshold)
}
