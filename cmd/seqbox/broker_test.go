package main

import (
	"context"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	natsbroker "github.com/seqbox/seqbox/internal/broker/nats"
	"github.com/seqbox/seqbox/internal/clitest"
)

// The operator binary links no broker emulator: those are seqbox-lab's.
func TestNoEmulatorLinked(t *testing.T) {
	deps := clitest.Deps(t, ".")
	for _, e := range clitest.Emulators {
		require.NotContains(t, deps, e)
	}
	// Nor the Pub/Sub client: only a lab worker consumes from Pub/Sub, and
	// google.golang.org/api alone is over 400 MB to download.
	require.NotContains(t, deps, "cloud.google.com/go/pubsub/v2")
	require.NotContains(t, deps, "google.golang.org/api")
}

// seqbox chaos over NATS against a server it did not start (one the test
// runs in its own process): the scenarios pass, and their streams are on
// that server.
func TestChaosExternalBroker(t *testing.T) {
	srv, err := natsbroker.Start(natsbroker.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Close()
	out := clitest.RunChaos(t, bin, "--transport", "nats", "--broker", srv.URL(), "--messages", "200", "--keys", "10",
		"--kills", "3", "--seed", "11", "--scenarios", "random,fault:after_commit_before_ack")
	require.Contains(t, out, "chaos: 2 scenarios passed, 0 failed")

	nc, err := natsgo.Connect(srv.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var streams []string
	names := js.StreamNames(context.Background())
	for n := range names.Name() {
		streams = append(streams, n)
	}
	require.NoError(t, names.Err())
	require.Len(t, streams, 2, "streams %v", streams)
	for _, s := range streams {
		require.True(t, strings.HasPrefix(s, "CHAOS"), "stream %s", s)
	}
}

// A broker transport without --broker: seqbox has no broker to start.
func TestChaosNeedsBroker(t *testing.T) {
	for _, tr := range []string{"nats", "kafka", "sqs", "pubsub"} {
		line := fails(t, "chaos", "--transport", tr)
		require.Equal(t, "seqbox: --transport "+tr+" needs a running broker: pass --broker with its address, "+
			"or run seqbox-lab chaos, which starts one in process", line)
	}
	line := fails(t, "chaos", "--broker", "nats://127.0.0.1:4222")
	require.Equal(t, "seqbox: --broker: the embedded transport has no broker", line)
}

// Pub/Sub cannot say what a subscription still holds, so a run against a
// running Pub/Sub is refused before it starts.
func TestChaosExternalPubsub(t *testing.T) {
	line := fails(t, "chaos", "--transport", "pubsub", "--broker", "127.0.0.1:1")
	require.Contains(t, line, "seqbox: --transport pubsub --broker: Pub/Sub has no call")
	require.Contains(t, line, "run seqbox-lab chaos --transport pubsub")
}
