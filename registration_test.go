package seqbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/store"
)

// running runs c in the background until the test ends, and returns a
// stop that cancels it and returns what Run returned.
func running(t *testing.T, c *seqbox.Consumer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var err error
	done := false
	stop = func() error {
		if !done {
			cancel()
			err, done = <-errc, true
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// registration reads the consumer's registration.
func registration(t *testing.T, b *bundle) (store.Registration, seqbox.Policies) {
	t.Helper()
	r, err := b.store.Executor().ConsumerGet(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	p, err := seqbox.RegisteredPolicies(r)
	require.NoError(t, err)
	return r, p
}

// A consumer that starts beside a live consumer of the same name with
// other policies fails, naming the policy, and changes nothing; one with
// the same policies competes, as usual; once the live one stops (cleanly,
// or its heartbeat ages as a dead process's does), the registration may
// be replaced.
func TestRegisterRefusesALiveConsumerWithOtherPolicies(t *testing.T) {
	b := setup(t)
	q := openQueue(t, filepath.Join(filepath.Dir(b.path), "queue.db"), 10*time.Second)
	b.cfg.Transport, b.cfg.Workers, b.cfg.BatchSize = q, 1, 8
	ctx := context.Background()

	live := b.consumer(t)
	stopLive := running(t, live)
	require.Eventually(t, func() bool {
		r, err := b.store.Executor().ConsumerGet(ctx, b.cfg.Name)
		return err == nil && !r.HeartbeatAt.IsZero()
	}, 10*time.Second, 5*time.Millisecond, "the live consumer registers with a heartbeat")
	before, _ := registration(t, b)

	other := func(mutate func(*seqbox.Config)) *seqbox.Consumer {
		cfg := b.cfg
		mutate(&cfg)
		c, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		return c
	}
	// A refused Run returns at once; the bound only keeps a Run that
	// wrongly starts from hanging the test.
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	advance := other(func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
	err := advance.Run(bounded)
	require.ErrorIs(t, err, seqbox.ErrPolicyConflict)
	require.Contains(t, err.Error(), `consumer "test": policy gap_policy is advance here but hold in the live consumer of the same name (process `)
	require.Contains(t, err.Error(), "stop that one, give this one another name, or wait until that heartbeat is 15s old")
	_, err = advance.Deliver(ctx, keyed("e1", "K", 1), 1)
	require.ErrorIs(t, err, seqbox.ErrPolicyConflict, "a delivery registers too")
	require.Zero(t, b.inboxRows(t), "a refused consumer applies nothing")
	longer := other(func(c *seqbox.Config) { c.Retention = 60 * 24 * time.Hour })
	err = longer.RunUntilIdle(bounded, time.Second)
	require.ErrorIs(t, err, seqbox.ErrPolicyConflict)
	require.Contains(t, err.Error(), "policy retention is 1440h0m0s here but 720h0m0s in the live consumer")
	window := other(func(c *seqbox.Config) { c.RedriveWindow = 2 * time.Hour })
	_, err = window.DeliverBatch(ctx, [][]byte{keyed("e1", "K", 1)})
	require.ErrorIs(t, err, seqbox.ErrPolicyConflict)
	require.Contains(t, err.Error(), "policy redrive_window is 2h0m0s here but 24h0m0s")
	after, _ := registration(t, b)
	require.Equal(t, before.Policies, after.Policies, "the live registration stands")

	// The same policies compete for the same queue.
	twin := b.consumer(t)
	stopTwin := running(t, twin)
	require.NoError(t, q.PublishBatch(ctx, [][]byte{keyed("e1", "K", 1), keyed("e2", "K", 2), keyed("e3", "L", 1)}))
	require.Eventually(t, func() bool { return unacked(t, q) == 0 }, 20*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 3, b.inboxRows(t))
	require.NoError(t, stopTwin())
	require.NoError(t, stopLive())

	// Both stopped cleanly: the consumer may restart with other policies
	// at once.
	stopAdvance := running(t, advance)
	require.Eventually(t, func() bool {
		_, p := registration(t, b)
		return p.GapPolicy == seqbox.GapAdvance
	}, 10*time.Second, 5*time.Millisecond, "the stopped registration is replaced")
	_, err = advance.Deliver(ctx, keyed("e4", "K", 3), 1)
	require.NoError(t, err)

	// Now it is the live one: the old policies are refused in turn.
	err = b.consumer(t).Run(bounded)
	require.ErrorIs(t, err, seqbox.ErrPolicyConflict)
	require.Contains(t, err.Error(), "policy gap_policy is hold here but advance")
	require.NoError(t, stopAdvance())
}

// A registration whose heartbeat stopped LiveWithin ago (a killed
// process: nothing marked it stopped) is replaced; one that never ran
// (Deliver only) has no heartbeat and is replaced too.
func TestRegisterReplacesAStaleRegistration(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	first := b.consumer(t)
	_, err := first.Deliver(ctx, keyed("e1", "K", 1), 1)
	require.NoError(t, err)
	r, _ := registration(t, b)
	require.True(t, r.HeartbeatAt.IsZero())

	// Never ran: replaced by other policies.
	b.cfg.MaxAge = time.Hour
	second := b.consumer(t)
	_, err = second.Deliver(ctx, keyed("e2", "K", 2), 1)
	require.NoError(t, err)
	_, p := registration(t, b)
	require.Equal(t, time.Hour, p.MaxAge)

	// A heartbeat fresh within LiveWithin is live; an older one is not.
	for _, c := range []struct {
		age  time.Duration
		live bool
	}{{seqbox.LiveWithin - time.Second, true}, {seqbox.LiveWithin + time.Second, false}} {
		require.NoError(t, b.store.Executor().ConsumerHeartbeat(ctx, store.ConsumerHeartbeatParams{Consumer: b.cfg.Name, At: time.Now().Add(-c.age)}))
		b.cfg.MaxAge = 2 * time.Hour
		_, err = b.consumer(t).Deliver(ctx, keyed("e3", "K", 3), 1)
		if c.live {
			require.True(t, errors.Is(err, seqbox.ErrPolicyConflict), "heartbeat %s old: %v", c.age, err)
			require.Contains(t, err.Error(), "policy max_age is 2h0m0s here but 1h0m0s")
			continue
		}
		require.NoError(t, err, "heartbeat %s old", c.age)
		_, p := registration(t, b)
		require.Equal(t, 2*time.Hour, p.MaxAge)
	}
}
