package nats_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	broker "github.com/seqbox/seqbox/internal/broker/nats"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/internal/waitfor"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the in-process NATS broker's suite") {
		return
	}
	goleak.VerifyTestMain(m)
}

// TestRestartKeepsStream: a server started on loopback takes a JetStream
// message, and after Shutdown and Restart serves it again from the same
// address and files.
func TestRestartKeepsStream(t *testing.T) {
	s, err := broker.Start(broker.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer s.Close()
	url := s.URL()
	publish(t, url, "R1")
	s.Shutdown()
	if s.Running() {
		t.Fatal("running after Shutdown")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if s.URL() != url {
		t.Fatalf("restarted on %s, was %s", s.URL(), url)
	}
	if n := msgs(t, url, "R1"); n != 1 {
		t.Fatalf("stream holds %d messages after restart, want 1", n)
	}
}

// TestClusterReplicates: a 3-node cluster places a 3-replica stream, and
// a message stored there survives the stream leader's shutdown.
func TestClusterReplicates(t *testing.T) {
	c, err := broker.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	defer c.Close()
	leader := publish(t, c.URL(), "C1", 3)
	c.Node(leader).Shutdown()
	if n := msgs(t, c.URL(), "C1"); n != 1 {
		t.Fatalf("stream holds %d messages after its leader stopped, want 1", n)
	}
}

// publish creates stream name with one message and returns its leader.
func publish(t *testing.T, url, name string, replicas ...int) string {
	t.Helper()
	js := connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := 1
	if len(replicas) > 0 {
		r = replicas[0]
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: r})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	// A replicated stream takes messages once its replicas elected a
	// leader; until then a publication meets "no response from stream".
	// It is published as a producer does, again on a failure, under one
	// message id, so that the stream stores it once.
	var perr error
	if !waitfor.Until(20*time.Second, func() bool {
		_, perr = js.Publish(ctx, name+".x", []byte("hello"), jetstream.WithMsgID(name+"-1"))
		return perr == nil
	}) {
		t.Fatalf("publish: %v", perr)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// msgs counts the stream's messages, waiting out a leader election.
func msgs(t *testing.T, url, name string) uint64 {
	t.Helper()
	js := connect(t, url)
	var n uint64
	var err error
	answered := waitfor.Until(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var st jetstream.Stream
		var info *jetstream.StreamInfo
		if st, err = js.Stream(ctx, name); err == nil {
			info, err = st.Info(ctx)
		}
		if err == nil {
			n = info.State.Msgs
		}
		return err == nil
	})
	if !answered {
		t.Fatalf("stream %s: %v", name, err)
	}
	return n
}

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := natsgo.Connect(url, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100*time.Millisecond))
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
