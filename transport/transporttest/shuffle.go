package transporttest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// Shuffler is a transport that breaks every ordering promise of the one it
// wraps, to show that seqbox's gate does not depend on them. See Shuffle.
type Shuffler struct {
	inner     transport.Transport
	mu        sync.Mutex
	rng       *rand.Rand
	sentBack  map[string]bool
	top       map[string]int64
	reordered atomic.Int64
}

// Shuffle wraps tr: each received batch is handed out in a random order,
// and a quarter of the messages seen for the first time are nacked at once
// instead, so they come back after their successors. The seed makes the
// choices repeatable for one sequence of batches.
func Shuffle(tr transport.Transport, seed uint64) *Shuffler {
	return &Shuffler{inner: tr, rng: rand.New(rand.NewPCG(seed, seed^0x5eb0)), sentBack: map[string]bool{}, top: map[string]int64{}}
}

// Receive receives from the wrapped transport and reorders.
func (s *Shuffler) Receive(ctx context.Context, n int) ([]transport.Delivery, error) {
	ds, err := s.inner.Receive(ctx, n)
	if len(ds) == 0 {
		return ds, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
	out := ds[:0:0]
	for _, d := range ds {
		ev, perr := seqboxtype.ParseEvent(d.Body())
		if perr == nil && !s.sentBack[ev.ID] && s.rng.IntN(4) == 0 {
			s.sentBack[ev.ID] = true
			if nerr := d.Nack(ctx, 0); nerr == nil {
				continue
			}
		}
		if v, ok := ev.Version(); perr == nil && ok {
			if v < s.top[ev.PartitionKey] {
				s.reordered.Add(1)
			}
			s.top[ev.PartitionKey] = max(s.top[ev.PartitionKey], v)
		}
		out = append(out, d)
	}
	return out, err
}

// Close closes the wrapped transport.
func (s *Shuffler) Close() error { return s.inner.Close() }

// Reordered is how many deliveries were handed out after a later version
// of their key.
func (s *Shuffler) Reordered() int64 { return s.reordered.Load() }
