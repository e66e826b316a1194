package cli

import "fmt"

// The most a bench command holds in memory at once: a run builds its
// messages' envelopes before it starts (about 300 bytes each) and keeps a
// record per agent event. A larger count was a crash (Go's "fatal error:
// out of memory") instead of an error that names the flag.
const (
	// maxBenchMessages bounds a run's messages (--messages,
	// --core-messages).
	maxBenchMessages = 10_000_000
	// maxAgentEvents bounds bench agent's --keys x --versions.
	maxAgentEvents = 1_000_000
	// maxAgentChain bounds bench agent's --chain.
	maxAgentChain = 100_000
)

// countFlag is a count a bench command takes: at least 1, and at most
// max when max is set.
type countFlag struct {
	name string
	v    int
	max  int
}

// checkCounts refuses the first count out of its range, naming the
// command, the flag and the bound.
func checkCounts(cmd string, flags ...countFlag) error {
	for _, f := range flags {
		if f.v < 1 {
			return fmt.Errorf("%s: --%s %d: must be at least 1", cmd, f.name, f.v)
		}
		if f.max > 0 && f.v > f.max {
			return fmt.Errorf("%s: --%s %d: at most %d (a run holds them in memory)", cmd, f.name, f.v, f.max)
		}
	}
	return nil
}
