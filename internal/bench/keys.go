package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// keyCase is one row of the key sweep: n messages over keys partition
// keys, spread uniformly or by a Zipf law (s > 0).
type keyCase struct {
	keys, n int
	// zipfS is the Zipf exponent; 0 spreads the messages uniformly.
	zipfS float64
	// seed: the key rows are created in bulk before the run, so messages
	// land on a table holding all of them; keep: the seeded rows no
	// message touched are left in place afterwards.
	seed, keep bool
}

// keyRow is what one case measured.
type keyRow struct {
	keyCase
	elapsed time.Duration
	lat     Latency
	rss     rssUse
	note    string
}

// zipfS and zipfKeys are the hot-key case: most messages on a few keys.
const (
	zipfS    = 1.1
	zipfKeys = 10_000
	// millionKeys is the largest key space of the sweep.
	millionKeys = 1_000_000
)

// keyCases are the sweep's cases, the same number of messages in each, so
// that only the keys differ.
func keyCases(quick bool) []keyCase {
	n := 10_000
	if quick {
		n = 1_000
	}
	return []keyCase{{keys: 1, n: n}, {keys: 100, n: n}, {keys: 10_000, n: n},
		{keys: millionKeys, n: n, seed: true}, {keys: zipfKeys, n: n, zipfS: zipfS}}
}

func (c keyCase) spread() string {
	if c.zipfS > 0 {
		return fmt.Sprintf("zipf(s=%.1f)", c.zipfS)
	}
	return "uniform"
}

// keySweep runs seqbox end to end once per case, on the same database and
// settings, each time with the case's messages queued beforehand.
func keySweep(ctx context.Context, e *env, run string, o SummaryOptions, workers, batch int) ([]keyRow, error) {
	var rows []keyRow
	for i, c := range keyCases(o.Quick) {
		c.keep = o.Scratch
		r, err := runKeyCase(ctx, e, fmt.Sprintf("%sk%d-", run, i), c, workers, batch)
		if err != nil {
			return nil, fmt.Errorf("keys=%d %s: %w", c.keys, c.spread(), err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// runKeyCase seeds the key rows when the case says so and queues the
// messages (both untimed), then consumes them and measures the rate, the
// latency and the resident set. It fails unless every message was applied
// exactly once and, on seeded keys, no key row was created.
func runKeyCase(ctx context.Context, e *env, prefix string, c keyCase, workers, batch int) (keyRow, error) {
	r := keyRow{keyCase: c}
	if c.seed {
		took, err := seedKeys(ctx, e, prefix, c.keys)
		if err != nil {
			return r, err
		}
		r.note = fmt.Sprintf("%d key rows pre-seeded in %.1fs (untimed); ", c.keys, took.Seconds())
	}
	used, hottest, err := queueStream(ctx, e, prefix, c)
	if err != nil {
		return r, err
	}
	win := openRSS()
	l, err := startLive(ctx, e, workers, batch)
	if err != nil {
		return r, err
	}
	waitErr := l.waitApplied(ctx, int64(c.n))
	r.elapsed = time.Since(l.start)
	if err := stopLive(l, waitErr); err != nil {
		return r, err
	}
	r.rss = win.close()
	if a, o := l.rec.applied.Load(), l.rec.other.Load(); a != int64(c.n) || o != 0 {
		return r, fmt.Errorf("%d applied and %d other outcomes (the first: %s), want %d applied", a, o, l.rec.otherText(), c.n)
	}
	_, lats := l.rec.window(time.Time{}, time.Now())
	r.lat = LatencyOf(lats)
	switch {
	case c.seed:
		all, versioned, err := keyRows(ctx, e, prefix)
		if err != nil {
			return r, err
		}
		if all != int64(c.keys) || versioned != int64(used) {
			return r, fmt.Errorf("%d key rows, %d with a version; want %d and %d", all, versioned, c.keys, used)
		}
		r.note += fmt.Sprintf("after the run %d rows, %d of them versioned", all, versioned)
		if !c.keep {
			if err := dropUnusedKeys(ctx, e, prefix); err != nil {
				return r, err
			}
		}
	case c.zipfS > 0:
		r.note = fmt.Sprintf("hottest key %.1f%% of messages, %d keys used", 100*float64(hottest)/float64(c.n), used)
	case c.keys == 1:
		r.note = "one key: one batch at a time (a key is pinned to one worker)"
	}
	return r, nil
}

// queueStream publishes the case's messages and returns how many keys
// they use and how many the hottest key got. Message i goes to key
// i·611953 mod keys (a permutation: the prime shares no factor with the
// sizes used), or to a Zipf draw; each key's versions count up from 1 in
// publish order. The bodies are garbage once it returns.
func queueStream(ctx context.Context, e *env, prefix string, c keyCase) (used, hottest int, err error) {
	keyOf := func(i int) int { return int(uint64(i) * 611953 % uint64(c.keys)) }
	if c.zipfS > 0 {
		z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), c.zipfS, 1, uint64(c.keys-1))
		keyOf = func(int) int { return int(z.Uint64()) }
	}
	versions := map[int]int{}
	bodies := make([][]byte, c.n)
	for i := range bodies {
		k := keyOf(i)
		versions[k]++
		hottest = max(hottest, versions[k])
		bodies[i] = keyedBody("bench", prefix, keyName(prefix, k), i, versions[k])
	}
	return len(versions), hottest, publish(ctx, e.q, bodies)
}
