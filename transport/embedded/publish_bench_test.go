package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/transport/embedded"
)

// BenchmarkPublishGrouped1000 publishes 1,000 grouped messages in one
// transaction on a SQLite file, as the gateway's ingest does for a group
// of requests: ns/op is one such publish.
func BenchmarkPublishGrouped1000(b *testing.B) {
	ctx := context.Background()
	q, err := embedded.Open(ctx, filepath.Join(b.TempDir(), "q.db"), embedded.Config{Name: "b"})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	bodies := make([][]byte, 1000)
	groups := make([]string, 1000)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"id":"e-%d","specversion":"1.0","source":"bench","type":"t","partitionkey":"k%d","data":{}}`, i, i)
		groups[i] = fmt.Sprintf("k:k%d", i)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := q.PublishGrouped(ctx, bodies, groups); err != nil {
			b.Fatal(err)
		}
	}
}
