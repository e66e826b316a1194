package transporttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
)

// Throughput measures seqbox end to end over a broker: it publishes n
// events spread over keys keys (versions 1, 2, … per key), then consumes
// them with one seqbox Consumer (4 workers, batches of up to 256) over a
// fresh SQLite store whose handler writes one effect row per event. It
// returns the applied events per second from the consumer's start to the
// last commit, and fails t unless every event was applied once, in order.
// Publishing is not timed.
func Throughput(t testing.TB, b Broker, n, keys int) float64 {
	t.Helper()
	want := map[string]int64{}
	var pub [][]byte
	for i := range n {
		key := fmt.Sprintf("key-%04d", i%keys)
		want[key]++
		pub = append(pub, Event(key, want[key]))
	}
	for len(pub) > 0 {
		chunk := pub[:min(len(pub), 500)]
		pub = pub[len(chunk):]
		b.publish(t, chunk...)
	}
	r := NewEffectsStore(t)
	c := r.consumer(t, b, b.open(t), func(cfg *seqbox.Config) { cfg.BatchSize = 256 })
	start := time.Now()
	reached := r.consume(t, 5*time.Minute, "every event applied", r.applied(t, n), c)
	got, applied := r.Applied(t)
	if applied != n || reached.IsZero() {
		t.Fatalf("applied %d of %d events", applied, n)
	}
	inOrder(t, got, want)
	return float64(n) / reached.Sub(start).Seconds()
}
