package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	broker "github.com/seqbox/seqbox/internal/broker/nats"
	"github.com/seqbox/seqbox/internal/waitfor"
	natstr "github.com/seqbox/seqbox/transport/nats"
)

// TestClusterNodeDiesMidRun: a 3-node JetStream cluster on loopback, the
// stream and consumer replicated 3 times, two seqbox consumers (one member
// each) applying into one SQLite store. Once a third of the messages is
// applied, the stream leader's node is shut down; the rest is published
// through the failover, each publication retried until the stream
// acknowledges it. Every message is applied exactly once and each key in
// version order, and the stream holds each message once.
func TestClusterNodeDiesMidRun(t *testing.T) {
	const lease = 2 * time.Second
	const keys, versions = 20, 15
	c, err := broker.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cfg := freshConfig(c.URL(), lease)
	cfg.Replicas = 3
	pub := publisherT(t, cfg)
	var names []string
	for k := range keys {
		names = append(names, fmt.Sprintf("acct-%02d", k))
	}
	publish := func(from, to int64) {
		t.Helper()
		for v := from; v <= to; v++ {
			for _, k := range names {
				publishRetrying(t, pub, event(k, v))
			}
		}
	}
	publish(1, versions/2)

	r := newRig(t)
	stop := run(t, r.consumer(t, openRetrying(t, cfg), lease, nil), r.consumer(t, openRetrying(t, cfg), lease, nil))
	r.waitEffects(t, keys*versions/3, 60*time.Second)

	js := inspect(t, c.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	leader := st.CachedInfo().Cluster.Leader
	node := c.Node(leader)
	if node == nil {
		t.Fatalf("stream leader %q is not a node of the cluster", leader)
	}
	applied := r.effects(t)
	node.Shutdown()
	t.Logf("shut down %s, the stream leader, after %d of %d effects", leader, applied, keys*versions)

	publish(versions/2+1, versions)
	r.waitEffects(t, keys*versions, 120*time.Second)
	// Nothing unsettled is left to come back once the broker has every
	// message acknowledged.
	waitAcked(t, js, cfg, 120*time.Second)
	stop()
	r.appliedOnceInOrder(t, names, versions)
	if n := streamMsgs(t, js, cfg.Stream); n != keys*versions {
		t.Fatalf("stream holds %d messages, want %d (retried publications must be dropped as duplicates)", n, keys*versions)
	}
}

// publishRetrying publishes body until the stream acknowledges it, as a
// producer does through a leader election.
// openRetrying opens the transport, again while the cluster's API times
// out: a consumer of three replicas is created through the cluster's
// consensus, which on two loaded cores took longer than the JetStream
// API's 5 s once in a CI run ("consumer seqbox: context deadline
// exceeded").
func openRetrying(t *testing.T, cfg natstr.Config) *natstr.Transport {
	t.Helper()
	var tr *natstr.Transport
	var err error
	opened := waitfor.Until(60*time.Second, func() bool {
		tr, err = natstr.Open(context.Background(), cfg)
		return err == nil
	})
	if !opened {
		t.Fatalf("open transport: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func publishRetrying(t *testing.T, pub *natstr.Publisher, body []byte) {
	t.Helper()
	var err error
	stored := waitfor.Until(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = pub.Publish(ctx, body)
		return err == nil
	})
	if !stored {
		t.Fatalf("publish %s: %v", body, err)
	}
}
