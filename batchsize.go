package seqbox

import (
	"math"
	"sync"
	"time"
)

// batchSizer is group commit that adapts to Config.TargetLatency
// (docs/design.md §5, "batch size"). A delivery waits for its batch to
// fill only while another batch runs, and a quarter of the target at most
// (scheduler.groupWait): a worker takes what is ready. What the sizer bounds
// is how large a batch grows: a message that arrives just after a batch
// began waits for it and then runs in the next, so a batch's transaction
// gets half the target.
//
// A batch's time is a fixed part, paid by every batch whatever its size
// (BEGIN, round trips, the commit's flush), and a part per message. Only
// the second grows with the size, so only it is what a cap can keep
// within the budget: a smaller batch saves a message nothing of the fixed
// part, and more batches pay it, which on a busy machine makes every
// batch slower. The sizer therefore fits time = fixed + perMessage × size
// over the recent batches (least squares, older batches weighing less)
// and sets the cap so that perMessage × cap fits the budget. When the
// recent batches were all about one size, the split cannot be told, and
// the cost per message is the batches' time over their size, the fixed
// part included: an upper bound, so the cap errs on the small side.
// When the oldest ready message has already waited longer than the whole
// target, the target is lost for it: batches grow to BatchSize, the size
// that drains a backlog fastest, until the queue is back within the
// target.
type batchSizer struct {
	mu     sync.Mutex
	budget time.Duration // per batch: TargetLatency/2
	target time.Duration
	max    int
	// cap is the current bound, smoothed over batches.
	cap float64
	// fit holds the batches' weighted sums for the least squares.
	fit costFit
}

// minBatchCap is the smallest cap the sizer sets: a handful of messages
// share a commit even when one message alone exceeds the budget.
const minBatchCap = 8

// capSmoothing is the weight of the newest batch's estimate in the cap.
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
	// soon as its oldest delivery has waited the target. What it would
	// cost is the first batch of every worker after a start, when a
	// restarted consumer meets its backlog (docs/benchmarks-history.md
	// §11).
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
	z.fit.add(float64(n), d.Seconds())
	want := float64(z.max)
	if per := z.fit.perMessage(); per > 0 {
		want = z.budget.Seconds() / per
	}
	z.cap = (1-capSmoothing)*z.cap + capSmoothing*want
	z.cap = max(float64(minBatchCap), min(float64(z.max), z.cap))
}

// costFit is a least-squares fit of a batch's time against its size over
// the recent batches, each older batch weighing costDecay times the next.
type costFit struct {
	w, n, d, nn, nd float64 // weighted sums of 1, n, d, n², n·d
}

// costDecay is how much a batch's weight in the fit shrinks with each
// newer batch: the fit remembers about the last twenty.
const costDecay = 0.95

// spreadNeeded is how far the recent sizes must spread (their standard
// deviation, relative to their mean) for the fit to split the fixed part
// from the part per message.
const spreadNeeded = 0.1

func (f *costFit) add(n, d float64) {
	f.w = costDecay*f.w + 1
	f.n = costDecay*f.n + n
	f.d = costDecay*f.d + d
	f.nn = costDecay*f.nn + n*n
	f.nd = costDecay*f.nd + n*d
}

// perMessage is the time a message adds to its batch, in seconds: the
// fit's slope when the sizes spread enough to tell it, else the mean
// time per message (fixed part included). Zero or less: the size costs
// nothing the fit can see.
func (f *costFit) perMessage() float64 {
	meanN, meanD := f.n/f.w, f.d/f.w
	variance := f.nn/f.w - meanN*meanN
	if f.w < 3 || variance <= 0 || math.Sqrt(variance) < spreadNeeded*meanN {
		return meanD / meanN
	}
	return (f.nd/f.w - meanN*meanD) / variance
}
