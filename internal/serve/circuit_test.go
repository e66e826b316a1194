package serve

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// openCircuit is a circuit opened by circuitThreshold failures in a row,
// with probe as its pre-check.
func openCircuit(t *testing.T, probe func(context.Context) error) *circuit {
	t.Helper()
	c := newCircuit(time.Now, probe, nil)
	for range circuitThreshold {
		p, err := c.wait(t.Context())
		require.NoError(t, err)
		p.failure("connection refused")
	}
	open, _ := c.state()
	require.True(t, open)
	return c
}

// waiters starts n dispatches waiting on c; each pass they get is sent
// on the channel.
func waiters(ctx context.Context, c *circuit, n int) <-chan *pass {
	got := make(chan *pass, n)
	for range n {
		go func() {
			if p, err := c.wait(ctx); err == nil {
				got <- p
			}
		}()
	}
	return got
}

// Half-open: after the pause exactly one dispatch goes, as the trial;
// its failure opens the circuit again for a longer pause while the others
// keep waiting; only a trial's success lets them all go.
func TestCircuitHalfOpenLetsOneTrialThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		c := openCircuit(t, nil)
		got := waiters(ctx, c, 5)
		synctest.Wait()
		require.Empty(t, got, "a dispatch went while the circuit paused")

		time.Sleep(circuitMinPause)
		synctest.Wait()
		require.Len(t, got, 1, "one trial after the pause")
		trial := <-got
		require.True(t, trial.trial)
		time.Sleep(circuitMaxPause)
		synctest.Wait()
		require.Empty(t, got, "others went while the trial was out")

		trial.failure("503")
		_, until := c.state()
		require.Equal(t, 2*circuitMinPause, time.Until(until), "a failed trial doubles the pause")
		time.Sleep(2*circuitMinPause - time.Millisecond)
		synctest.Wait()
		require.Empty(t, got)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Len(t, got, 1, "the next trial")
		trial = <-got
		trial.success()
		synctest.Wait()
		require.Len(t, got, 3, "a trial's success lets every waiter go")
		open, _ := c.state()
		require.False(t, open)
	})
}

// A failing HEAD probe keeps the circuit open and lets no call through
// (nobody pays an attempt); a passing one lets only the trial go, and
// does not close the circuit by itself.
func TestCircuitProbeIsOnlyAPreCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var up atomic.Bool
		var probes atomic.Int64
		c := openCircuit(t, func(context.Context) error {
			probes.Add(1)
			if up.Load() {
				return nil
			}
			return errors.New("connection refused")
		})
		got := waiters(ctx, c, 3)
		time.Sleep(circuitMinPause + 2*circuitMinPause + 4*circuitMinPause)
		synctest.Wait()
		require.Equal(t, int64(3), probes.Load(), "a probe after each pause, the pause doubling")
		require.Empty(t, got, "a failed probe let a call through")

		up.Store(true)
		time.Sleep(circuitMaxPause)
		synctest.Wait()
		require.Len(t, got, 1)
		open, _ := c.state()
		require.True(t, open, "a probe that passed closed the circuit before any real call succeeded")
		trial := <-got
		trial.release() // a 429: no news; the next waiter is the trial
		synctest.Wait()
		require.Len(t, got, 1)
		(<-got).success()
		synctest.Wait()
		require.Len(t, got, 1)
	})
}

// Reports of calls that started before the circuit opened are not news:
// neither a late failure nor a late success moves it. Successes in
// between reset the count of failures in a row.
func TestCircuitOldPassesAndSuccessesInBetween(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCircuit(time.Now, nil, nil)
		var ps []*pass
		for range 4 {
			p, err := c.wait(t.Context())
			require.NoError(t, err)
			ps = append(ps, p)
		}
		ps[0].failure("reset")
		ps[1].failure("reset")
		ps[2].success()
		ps[3].failure("reset")
		open, _ := c.state()
		require.False(t, open, "a success in between: not three in a row")
		c = openCircuit(t, nil)
		late := &pass{c: c, gen: c.gen - 1}
		late.success()
		open, _ = c.state()
		require.True(t, open, "a call from before the opening closed it")
	})
}
