package seqbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The gauges' refresh counts the inbox, which grows with retention: Run
// refreshes them every 15 s while a count is quick, and no more than a
// hundredth of the time once it is not.
func TestGaugesWaitGrowsWithTheCountsCost(t *testing.T) {
	require.Equal(t, gaugesEvery, gaugesWait(5*time.Millisecond))
	require.Equal(t, gaugesEvery, gaugesWait(150*time.Millisecond))
	require.Equal(t, 50*time.Second, gaugesWait(500*time.Millisecond))
	require.Equal(t, 100*time.Minute, gaugesWait(time.Minute))
}
