package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/clitest"
	"github.com/seqbox/seqbox/internal/shorttest"
)

// The harness over each broker transport, the broker in process on
// loopback: consumers SIGKILLed at random and after commit before ack, and
// for NATS a cluster node stopped mid-run.
func TestChaosTransports(t *testing.T) {
	shorttest.Skip(t, "the chaos suite")
	for _, tc := range []struct {
		transport string
		scenarios string
	}{
		{"nats", "random,fault:after_commit_before_ack,broker-node-kill"},
		{"kafka", "random,fault:after_commit_before_ack"},
		{"sqs", "random,fault:after_commit_before_ack"},
		{"pubsub", "random,fault:after_commit_before_ack"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			out := clitest.RunChaos(t, bin, "--transport", tc.transport, "--messages", "200", "--keys", "10", "--kills", "3",
				"--seed", "11", "--scenarios", tc.scenarios)
			n := len(strings.Split(tc.scenarios, ","))
			require.Contains(t, out, "chaos: "+strconv.Itoa(n)+" scenarios passed, 0 failed")
		})
	}
}

// seqbox-lab links the emulators that seqbox leaves out.
func TestEmulatorsLinked(t *testing.T) {
	deps := clitest.Deps(t, ".")
	for _, e := range clitest.Emulators {
		require.Contains(t, deps, e)
	}
}
