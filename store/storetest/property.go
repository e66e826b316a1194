package storetest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// ordPropertySeedEnv overrides the base seed of the ordering property test,
// to explore beyond the fixed seeds or to replay a reported failure:
// SEQBOX_ORDERING_SEED=12345 go test -run 'Ordering/Property' ./store/...
const ordPropertySeedEnv = "SEQBOX_ORDERING_SEED"

// ordPropertyIterations is how many random histories each variant checks.
const ordPropertyIterations = 30

// exerciseOrderingProperty delivers random per-key histories shuffled,
// duplicated and delayed, then redelivers everything once more, and checks
// the ordering invariant: with GapPolicy=hold every event of every key is
// applied exactly once and in version order, each key ends at its last
// version, and no held or blocked message is left behind.
func exerciseOrderingProperty(t *testing.T, open Factory) {
	base := uint64(20260925)
	if s := os.Getenv(ordPropertySeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s", ordPropertySeedEnv)
		base = v
	}
	for _, variant := range []struct {
		name     string
		failures bool
	}{{"Shuffled", false}, {"TransientFailures", true}} {
		t.Run(variant.name, func(t *testing.T) {
			// One store for the variant, one consumer per history: consumers
			// are isolated from each other, and opening a store is the slow
			// part on a server database.
			st := open(t)
			for i := range uint64(ordPropertyIterations) {
				seed := base + i
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					t.Logf("seed %d (reproduce with %s=%d and -run 'Property/%s/seed=%d')", seed, ordPropertySeedEnv, seed, variant.name, seed)
					ordPropertyRun(t, st, fmt.Sprintf("prop-%s-%d", variant.name, seed), seed, variant.failures)
				})
			}
		})
	}
}

// ordPropEvent is one event of a generated history.
type ordPropEvent struct {
	id, key string
	version int64
	raw     []byte
}

// ordPropDelivery is one broker delivery of an event.
type ordPropDelivery struct {
	ev      *ordPropEvent
	attempt int
}

func ordPropertyRun(t *testing.T, st store.Store, consumer string, seed uint64, failures bool) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	// Either every key starts at a configured FirstVersion (then any
	// arrival order is fine), or each key's first version seen is its
	// baseline: a random version, delivered before the rest of its key.
	var firstVersion *int64
	if r.IntN(2) == 0 {
		firstVersion = ordV(int64(r.IntN(3)))
	}
	e := ordSetupOn(t, st, consumer, func(c *seqbox.Config) {
		c.FirstVersion = firstVersion
		c.Retry.MaxAttempts = 5
	})
	h := newOrdHandler(e.cfg.Name)
	c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })

	nKeys := 2 + r.IntN(4)
	histories := map[string][]*ordPropEvent{}
	var all []*ordPropEvent
	keys := make([]string, nKeys)
	for k := range nKeys {
		key := fmt.Sprintf("OBJ-%d", k)
		keys[k] = key
		n := 1 + r.IntN(10)
		start := int64(1 + r.IntN(60))
		if firstVersion != nil {
			start = *firstVersion
		}
		for v := start; v < start+int64(n); v++ {
			ev := &ordPropEvent{id: fmt.Sprintf("%s-v%d", key, v), key: key, version: v}
			ev.raw = ordEvent(ev.id, key, v, fmt.Sprintf("state_%d", v))
			histories[key] = append(histories[key], ev)
			all = append(all, ev)
			if failures && r.IntN(4) == 0 {
				h.failOnce(ev.id) // its first attempt fails, wherever it happens
			}
		}
	}
	baseline := func(ev *ordPropEvent) bool { return firstVersion == nil && ev == histories[ev.key][0] }

	// Pass 1: shuffled; some events delayed to pass 2; some duplicated to
	// a later position.
	order := append([]*ordPropEvent(nil), all...)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	if firstVersion == nil {
		order = ordBaselinesFirst(order, baseline)
	}
	var pass1 []*ordPropEvent
	delayed := 0
	for _, ev := range order {
		if !baseline(ev) && r.IntN(6) == 0 {
			delayed++
			continue
		}
		pass1 = append(pass1, ev)
	}
	dups := 0
	for _, ev := range append([]*ordPropEvent(nil), pass1...) {
		if r.IntN(5) != 0 {
			continue
		}
		first := 0
		for pass1[first] != ev {
			first++
		}
		at := first + 1 + r.IntN(len(pass1)-first) // somewhere after the original
		pass1 = append(pass1[:at], append([]*ordPropEvent{ev}, pass1[at:]...)...)
		dups++
	}
	// Pass 2: everything once more, in a fresh random order.
	pass2 := append([]*ordPropEvent(nil), all...)
	r.Shuffle(len(pass2), func(i, j int) { pass2[i], pass2[j] = pass2[j], pass2[i] })
	t.Logf("keys=%d events=%d firstVersion=%s delayed=%d duplicated=%d failures=%v",
		nKeys, len(all), ordVer(firstVersion), delayed, dups, failures)

	tally := map[seqboxtype.Outcome]int{}
	appliedIDs := map[string]int{}
	run := func(pass []*ordPropEvent) {
		queue := make([]ordPropDelivery, len(pass))
		for i, ev := range pass {
			queue[i] = ordPropDelivery{ev: ev, attempt: 1}
		}
		for len(queue) > 0 {
			d := queue[0]
			queue = queue[1:]
			results := e.deliver(c, d.ev.raw, d.attempt)
			require.Equal(t, d.ev.id, results[0].ID)
			for _, x := range results {
				tally[x.Outcome]++
				if x.Outcome == seqboxtype.Applied {
					appliedIDs[x.ID]++
				}
			}
			if results[0].Outcome == seqboxtype.Retry {
				// Nacked: the broker redelivers it later, somewhere behind.
				at := r.IntN(len(queue) + 1)
				queue = append(queue[:at], append([]ordPropDelivery{{ev: d.ev, attempt: d.attempt + 1}}, queue[at:]...)...)
			}
		}
	}
	run(pass1)
	run(pass2)
	// An unparked message that failed transiently waits out its
	// backoff as held; the sweeper releases it once that has passed. Let
	// backoffs pass, but never a hold timeout.
	for range 10 {
		e.clock.Advance(20 * time.Millisecond)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		for _, x := range results {
			tally[x.Outcome]++
			if x.Outcome == seqboxtype.Applied {
				appliedIDs[x.ID]++
			}
		}
		if !failures {
			require.Empty(t, results, "without failures the sweeper has nothing to do")
		}
	}
	t.Logf("outcomes: %v", tally)

	for _, o := range []seqboxtype.Outcome{seqboxtype.Stale, seqboxtype.VersionConflict, seqboxtype.Collision, seqboxtype.DeadLettered,
		seqboxtype.Blocked, seqboxtype.Expired, seqboxtype.Rejected, seqboxtype.SemanticDuplicate} {
		require.Zero(t, tally[o], "no %s expected; outcomes: %v", o, tally)
	}
	require.Equal(t, len(all), tally[seqboxtype.Applied], "outcomes: %v", tally)
	for _, ev := range all {
		require.Equal(t, 1, appliedIDs[ev.id], "%s applied results", ev.id)
	}
	if !failures {
		require.Zero(t, tally[seqboxtype.Retry])
	}

	// Effects exactly once, in version order, per key; final version is the
	// last one.
	for _, key := range keys {
		hist := histories[key]
		want := make([]string, len(hist))
		for i, ev := range hist {
			want[i] = fmt.Sprintf("%s@%d state_%d", ev.id, ev.version, ev.version)
		}
		require.Equal(t, want, e.effects(key), "effects of %s in commit order", key)
		last := hist[len(hist)-1].version
		e.requireObject(key, fmt.Sprintf("state_%d", last), last)
		e.requireKey(key, ordV(last), false, 0, 0)
		require.Empty(t, e.gapLines(key), "nothing may be skipped when nothing was lost")
	}
	require.Len(t, e.effects(""), len(all))
	cn := e.counts()
	require.Equal(t, int64(len(all)), cn.InboxRows)
	require.Equal(t, int64(len(all)), cn.Applied)
	require.Equal(t, int64(nKeys), cn.Keys)
	require.Zero(t, cn.DeadLetters)
	e.requireNothingParked()
}

// ordBaselinesFirst moves each key's baseline event in front of the first
// event of its key, keeping the rest of the order.
func ordBaselinesFirst(order []*ordPropEvent, baseline func(*ordPropEvent) bool) []*ordPropEvent {
	out := make([]*ordPropEvent, 0, len(order))
	placed := map[string]bool{}
	var bases = map[string]*ordPropEvent{}
	for _, ev := range order {
		if baseline(ev) {
			bases[ev.key] = ev
		}
	}
	for _, ev := range order {
		if baseline(ev) {
			if placed[ev.key] {
				continue
			}
			placed[ev.key] = true
			out = append(out, ev)
			continue
		}
		if !placed[ev.key] {
			placed[ev.key] = true
			out = append(out, bases[ev.key])
		}
		out = append(out, ev)
	}
	return out
}
