package main

import (
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// bench ingest loads a running gateway in single and batch mode and
// prints what it measured; every event it sent was accepted.
func TestBenchIngest(t *testing.T) {
	s := startServe(t, nil, "--db", newDB(t))
	defer s.stop(t, syscall.SIGTERM)
	line := regexp.MustCompile(`^ingest: batch=(\d+) clients=(\d+) requests=(\d+) events_per_s=(\d+) p50_ms=[0-9.]+ p99_ms=[0-9.]+\n$`)
	for _, batch := range []string{"1", "20"} {
		out := ok(t, "bench", "ingest", "--url", s.url, "--clients", "4", "--batch", batch, "--duration", "1s")
		m := line.FindStringSubmatch(out)
		require.NotNil(t, m, "output %q", out)
		require.Equal(t, batch, m[1])
		requests, _ := strconv.Atoi(m[3])
		require.Positive(t, requests)
	}
	require.Contains(t, fails(t, "bench", "ingest", "--url", s.url, "--clients", "0"), "--clients >= 1")
}
