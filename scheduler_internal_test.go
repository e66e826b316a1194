package seqbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stub is a delivery the scheduler only files; it is never settled.
type stub struct{ name string }

func (s *stub) Body() []byte                                { return nil }
func (s *stub) Attempt() int                                { return 1 }
func (s *stub) Ack(context.Context) error                   { return nil }
func (s *stub) Nack(context.Context, time.Duration) error   { return nil }
func (s *stub) Extend(context.Context, time.Duration) error { return nil }

func names(b *batch) []string {
	out := make([]string, len(b.deliveries))
	for i, d := range b.deliveries {
		out[i] = d.(*stub).name
	}
	return out
}

// A batch takes at most half of itself from one key, a key is pinned to the
// batch that holds it, and a busy key goes to the back of the line.
func TestSchedulerSharesBatchesAndPinsKeys(t *testing.T) {
	s := newScheduler(100)
	ctx := context.Background()
	for i := range 10 {
		s.add("k:hot", &stub{name: "hot" + string(rune('0'+i))})
	}
	s.add("k:a", &stub{name: "a0"})
	s.add("k:b", &stub{name: "b0"})

	first := s.take(ctx, 4, nil)
	require.Equal(t, []string{"a0", "b0", "hot0", "hot1"}, names(first), "keys sorted; hot limited to half")
	// hot is pinned by the first batch: a second worker gets nothing from it.
	s.add("k:c", &stub{name: "c0"})
	second := s.take(ctx, 4, nil)
	require.Equal(t, []string{"c0"}, names(second))
	s.done(second)
	s.done(first)
	third := s.take(ctx, 4, nil)
	require.Equal(t, []string{"hot2", "hot3"}, names(third))

	// Releasing a key early (its part of a batch committed) lets another
	// worker take its next deliveries at once.
	s.add("k:a", &stub{name: "a1"})
	s.unpinEarly(third, []string{"k:hot"})
	fourth := s.take(ctx, 4, nil)
	require.Equal(t, []string{"a1", "hot4", "hot5"}, names(fourth))
	s.done(third) // a released key is not unpinned twice
	require.True(t, s.busy["k:hot"], "hot belongs to the fourth batch now")
}

// take returns nil once the context ends, and abandon hands back what was
// never taken, for nacking.
func TestSchedulerShutdown(t *testing.T) {
	s := newScheduler(100)
	s.add("k:a", &stub{name: "a0"})
	s.add("k:a", &stub{name: "a1"})
	ctx, cancel := context.WithCancel(context.Background())
	b := s.take(ctx, 1, nil)
	require.Equal(t, []string{"a0"}, names(b))
	cancel()
	require.Nil(t, s.take(ctx, 1, nil))
	left := s.abandon()
	require.Len(t, left, 1)
	require.Equal(t, "a1", left[0].(*stub).name)
}
