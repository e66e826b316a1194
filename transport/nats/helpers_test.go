package nats_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	broker "github.com/seqbox/seqbox/internal/broker/nats"
	natstr "github.com/seqbox/seqbox/transport/nats"

	natsgo "github.com/nats-io/nats.go"
)

// startServer runs a single JetStream server for the test.
func startServer(t testing.TB) *broker.Server {
	t.Helper()
	s, err := broker.Start(broker.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var streams atomic.Int64

// freshConfig names a stream, subject and durable no other test uses.
func freshConfig(url string, lease time.Duration) natstr.Config {
	n := streams.Add(1)
	return natstr.Config{
		URL:     url,
		Stream:  fmt.Sprintf("TEST%d", n),
		Subject: fmt.Sprintf("test%d.events", n),
		Durable: "seqbox",
		AckWait: lease,
	}
}

// openT opens a transport member and closes it when the test ends.
func openT(t testing.TB, cfg natstr.Config) *natstr.Transport {
	t.Helper()
	tr, err := natstr.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open transport: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// publisherT opens a publisher and closes it when the test ends.
func publisherT(t testing.TB, cfg natstr.Config) *natstr.Publisher {
	t.Helper()
	p, err := natstr.NewPublisher(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new publisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// inspect returns a JetStream client of the test's own, to look at the
// stream and consumer from outside the transport.
func inspect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}
