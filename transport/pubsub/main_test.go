package pubsub_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	broker "github.com/seqbox/seqbox/internal/broker/pubsub"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/transport/pubsub"
)

// TestMain checks for leaked goroutines. The Pub/Sub client imports
// OpenCensus, whose view worker is started by a package init and has no
// way to be stopped: it is the one goroutine ignored.
func TestMain(m *testing.M) {
	if shorttest.SkipMain("the Pub/Sub transport's broker suite") {
		return
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// startBroker starts a pstest server on loopback for the test.
func startBroker(t testing.TB) *broker.Server {
	t.Helper()
	srv, err := broker.Start(0)
	if err != nil {
		t.Fatalf("start pubsub broker: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

var names atomic.Int64

// fresh returns a config for a new topic and subscription on srv, with
// change applied, after running Setup.
func fresh(t testing.TB, srv *broker.Server, change func(*pubsub.Config)) pubsub.Config {
	t.Helper()
	n := names.Add(1)
	cfg := pubsub.Config{
		Project: broker.Project, Endpoint: srv.Addr,
		Topic: fmt.Sprintf("events-%d", n), Subscription: fmt.Sprintf("seqbox-%d", n),
		AckDeadline: lease,
	}
	if change != nil {
		change(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pubsub.Setup(ctx, cfg); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return cfg
}

// open opens a member and closes it when the test ends.
func open(t testing.TB, cfg pubsub.Config) *pubsub.Transport {
	t.Helper()
	tr, err := pubsub.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// publisher opens a publisher and closes it when the test ends.
func publisher(t testing.TB, cfg pubsub.Config) *pubsub.Publisher {
	t.Helper()
	p, err := pubsub.NewPublisher(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new publisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
