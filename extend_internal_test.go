package seqbox

import (
	"context"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// extending counts the extensions each delivery gets one by one.
type extending struct {
	stub
	extended int
}

func (e *extending) Extend(context.Context, time.Duration) error { e.extended++; return nil }

// receiveNothing is a transport that receives nothing; batchExtending adds
// ExtendBatch, recording its calls.
type receiveNothing struct{}

func (receiveNothing) Receive(context.Context, int) ([]transport.Delivery, error) { return nil, nil }
func (receiveNothing) Close() error                                               { return nil }

type batchExtending struct {
	receiveNothing
	calls [][]transport.Delivery
	by    time.Duration
}

func (b *batchExtending) ExtendBatch(_ context.Context, ds []transport.Delivery, by time.Duration) error {
	b.calls = append(b.calls, ds)
	b.by = by
	return nil
}

// The lease keeper extends everything it holds in one call when the
// transport can (the embedded queue: one statement and one commit instead
// of one each), and one by one otherwise.
func TestExtendIsOneCallWhenTheTransportBatches(t *testing.T) {
	held := []*extending{{}, {}, {}}
	ds := make([]transport.Delivery, len(held))
	for i, e := range held {
		ds[i] = e
	}

	be := &batchExtending{}
	c := &Consumer{cfg: Config{Transport: be, ExtendBy: time.Minute}}
	c.extend(context.Background(), ds)
	require.Len(t, be.calls, 1, "one call for every lease held")
	require.Equal(t, ds, be.calls[0])
	require.Equal(t, time.Minute, be.by)
	for _, e := range held {
		require.Zero(t, e.extended, "none one by one")
	}

	c = &Consumer{cfg: Config{Transport: receiveNothing{}, ExtendBy: time.Minute}}
	c.extend(context.Background(), ds)
	for _, e := range held {
		require.Equal(t, 1, e.extended, "without ExtendBatch, each once")
	}
}
