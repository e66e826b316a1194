package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/bench"
	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/stretchr/testify/require"
)

// On a terminal the progress line is rewritten in place, at most every
// progressEvery, and erased before a line that stays.
func TestProgressOnATerminal(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out, terminal: true}
	p.show("chaos: scenario 1/2")
	require.Equal(t, "\rchaos: scenario 1/2\x1b[K", out.String())
	p.show("chaos: scenario 1/2 again") // within progressEvery: skipped
	require.Equal(t, "\rchaos: scenario 1/2\x1b[K", out.String())
	p.last = time.Now().Add(-progressEvery)
	p.show("chaos: scenario 2/2")
	require.Equal(t, "\rchaos: scenario 1/2\x1b[K\rchaos: scenario 2/2\x1b[K", out.String())

	out.Reset()
	p.done("bench: naive: 10 msgs/s")
	require.Equal(t, "\r\x1b[Kbench: naive: 10 msgs/s\n", out.String())
	out.Reset()
	p.clear() // nothing shown: nothing to erase
	require.Empty(t, out.String())
	p.show("next")
	_, err := p.Write([]byte("a --verbose line\n"))
	require.NoError(t, err)
	require.Equal(t, "\rnext\x1b[K\r\x1b[Ka --verbose line\n", out.String())
}

// Elsewhere only the lines that stay are written.
func TestProgressElsewhere(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out}
	p.show("chaos: scenario 1/2")
	p.clear()
	require.Empty(t, out.String())
	p.onPhase(bench.Phase{Name: "naive", Step: "x"})
	require.Empty(t, out.String())
	p.onPhase(bench.Phase{Name: "naive", Done: true, Result: "812 msgs/s over 500 messages", Elapsed: 1234 * time.Millisecond})
	require.Equal(t, "bench: naive: 812 msgs/s over 500 messages (1.2s)\n", out.String())
}

func TestProgressLines(t *testing.T) {
	require.Equal(t, "chaos: scenario 3/8 fault:after_commit, phase 1: 412 messages pending, 2 kills, 12s",
		chaosProgress(chaos.Progress{Scenario: "fault:after_commit", Index: 3, Total: 8, Phase: "phase 1", Pending: 412, Kills: 2,
			Elapsed: 12300 * time.Millisecond}))
	require.Equal(t, "chaos: scenario 1/5 random, drain: 7 messages pending, 3s",
		chaosProgress(chaos.Progress{Scenario: "random", Index: 1, Total: 5, Phase: "drain", Pending: 7, Kills: -1, Elapsed: 3 * time.Second}))
	require.Contains(t, chaosProgress(chaos.Progress{Scenario: "random", Index: 1, Total: 1, Phase: "phase 2", Kills: 1}), ", 1 kill, ")
	require.Equal(t, "bench: raw limit, 0s", benchProgress(bench.Phase{Name: "raw limit"}))
	require.Equal(t, "bench: raw limit: batch 100, 4 writers, 2s",
		benchProgress(bench.Phase{Name: "raw limit", Step: "batch 100, 4 writers", Elapsed: 2 * time.Second}))
}

// A file or a pipe is not a terminal.
func TestIsTerminal(t *testing.T) {
	require.False(t, isTerminal(&bytes.Buffer{}))
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	require.False(t, isTerminal(f))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, isTerminal(w))
}

// Between a bench phase's steps, tick moves its time on a terminal.
func TestProgressTicks(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out, terminal: true}
	// progress writes to out under p.mu, so the test reads it under p.mu.
	written := func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return out.String()
	}
	p.onPhase(bench.Phase{Name: "latency at half rate"})
	stop, ticked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticked)
		p.tick(stop)
	}()
	waitfor.That(t, 30*time.Second, "a second line of the running phase", func() bool {
		return strings.Count(written(), "\rbench: latency at half rate, ") >= 2
	})
	close(stop)
	<-ticked
	require.Regexp(t, `\rbench: latency at half rate, [1-9][0-9]*s\x1b\[K`, out.String())
}
