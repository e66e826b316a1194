package outbox

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The wait after each refusal doubles from Backoff up to MaxBackoff, and
// never overflows however many refusals or however long the cap.
func TestBackoffDoublesUpToItsCap(t *testing.T) {
	r := &Relay{cfg: Config{Backoff: time.Second, MaxBackoff: 10 * time.Second}}
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, r.backoff(a))
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)
	require.Equal(t, 10*time.Second, r.backoff(math.MaxInt32))
	r = &Relay{cfg: Config{Backoff: time.Hour, MaxBackoff: math.MaxInt64}}
	require.Equal(t, time.Duration(math.MaxInt64), r.backoff(100))
}
