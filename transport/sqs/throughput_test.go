package sqs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// BenchmarkThroughput publishes b.N events over 50 keys in batches, then
// receives and batch-acknowledges them, and reports messages per second
// through goaws (transport only, no store).
func BenchmarkThroughput(b *testing.B) {
	e := newEnv(b, 30*time.Second, broker.Queue{})
	ctx := context.Background()
	var pub [][]byte
	for i := range b.N {
		pub = append(pub, transporttest.Event(fmt.Sprintf("key-%d", i%50), int64(i/50+1)))
	}
	tr := e.open(b)
	b.ResetTimer()
	start := time.Now()
	if err := e.pub.PublishBatch(ctx, pub); err != nil {
		b.Fatal(err)
	}
	published := time.Since(start)
	got := 0
	for got < b.N {
		ds, err := tr.Receive(ctx, 100)
		if err != nil {
			b.Fatal(err)
		}
		if err := tr.AckBatch(ctx, ds); err != nil {
			b.Fatal(err)
		}
		got += len(ds)
	}
	b.ReportMetric(float64(b.N)/published.Seconds(), "published/s")
	b.ReportMetric(float64(b.N)/(time.Since(start)-published).Seconds(), "consumed/s")
}
