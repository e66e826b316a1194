package seqbox

import (
	"sync"
	"time"
)

// batchSizer is group commit that adapts to Config.TargetLatency
// (docs/design.md §5, "batch size"). A delivery waits for its batch to
// fill only while another batch runs, and a quarter of the target at most
// (scheduler.hold): a worker takes what is ready. What the sizer bounds
// is how large a batch grows: a message that arrives just after a batch began
// waits for it and then runs in the next, so a batch's transaction gets
// half the target. From each committed batch it learns the time per
// message and sets the cap so that a batch of that many fits the budget;
// light traffic makes small batches anyway, a queue makes them as large
// as the budget allows. When the oldest ready message has already waited
// longer than the whole target, the target is lost for it: batches grow
// to BatchSize, the size that drains a backlog fastest, until the queue
// is back within the target.
type batchSizer struct {
	mu     sync.Mutex
	budget time.Duration // per batch: TargetLatency/2
	target time.Duration
	max    int
	// cap is the current bound, smoothed over batches.
	cap float64
}

// minBatchCap is the smallest cap the sizer sets: a handful of messages
// share a commit even when one commit alone exceeds the budget.
const minBatchCap = 8

// capSmoothing is the weight of the newest batch in the cap.
const capSmoothing = 0.3

// newBatchSizer returns the sizer for cfg; nil when TargetLatency is
// negative (batches of up to BatchSize, whatever the latency).
func newBatchSizer(cfg Config) *batchSizer {
	if cfg.TargetLatency < 0 {
		return nil
	}
	// It starts at BatchSize and learns from the first batch on. A
	// smaller start protects nothing: it binds only when more is ready
	// than it allows, and a backlog lifts the cap to BatchSize anyway as
	// soon as its oldest delivery has waited the target. What it did cost
	// was the first batch of every worker after a start, when a restarted
	// consumer meets its backlog: 64 each instead of the full batch, on
	// PostgreSQL 8% of bench/peers' run (docs/benchmarks.md §11).
	return &batchSizer{budget: cfg.TargetLatency / 2, target: cfg.TargetLatency, max: cfg.BatchSize,
		cap: float64(cfg.BatchSize)}
}

// limit is the most deliveries the next batch may take, given how long
// the oldest ready delivery has waited.
func (z *batchSizer) limit(oldestWait time.Duration) int {
	if z == nil || oldestWait > z.target {
		return z.maxSize()
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	return max(1, min(z.max, int(z.cap)))
}

func (z *batchSizer) maxSize() int {
	if z == nil {
		return 0 // the caller's BatchSize
	}
	return z.max
}

// observe learns from a batch of n deliveries whose transaction took d.
func (z *batchSizer) observe(n int, d time.Duration) {
	if z == nil || n <= 0 || d <= 0 {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	// The size that would have fit the budget at this batch's cost per
	// message. A small batch says little about larger ones (its fixed
	// cost dominates), so a batch of n raises the cap to 2n at most:
	// under a burst the cap doubles batch by batch while they fit.
	fit := float64(n) * float64(z.budget) / float64(d)
	fit = min(fit, 2*float64(n))
	z.cap = (1-capSmoothing)*z.cap + capSmoothing*fit
	z.cap = max(float64(minBatchCap), min(float64(z.max), z.cap))
}
