package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ciBounds are the bounds the tests explore: every mechanism takes part.
func ciBounds() Bounds { return SmallBounds() }

func TestTheProtocolHoldsWithinTheCIBounds(t *testing.T) {
	m, err := New(ciBounds(), "")
	require.NoError(t, err)
	r := m.Check(Options{Liveness: true})
	require.Empty(t, r.Violation, strings.Join(r.Trace, "\n"))
	require.True(t, r.Complete)
	require.Greater(t, r.States, 10_000, "the CI bounds explore a real space")
	t.Logf("states=%d depth=%d transitions=%d in %s", r.States, r.Depth, r.Transitions, r.Elapsed)
}

// Every mutant is a known way to break the protocol: the checker must
// find a counterexample for each, within the CI bounds.
func TestEveryMutantIsCaught(t *testing.T) {
	names := map[Mutant]bool{}
	for _, mu := range Mutants() {
		names[mu] = true
		t.Run(string(mu), func(t *testing.T) {
			m, err := New(mu.Needs(ciBounds()), mu)
			require.NoError(t, err)
			r := m.Check(Options{Liveness: true})
			require.NotEmpty(t, r.Violation, "mutant %s (%s) went unnoticed over %d states", mu, mu.Describe(), r.States)
			require.NotEmpty(t, r.Trace)
			require.Equal(t, 1, r.Violations())
			t.Logf("%s: %s in %d steps", mu, r.Violation, r.Depth)
		})
	}
	for _, must := range []Mutant{"ack-before-commit", "no-inbox-insert", "gate-skipped", "turn-ends-on-nack",
		"decide-before-semantic-check", "ledger-no-pending"} {
		require.True(t, names[must], "mutant %s is listed", must)
	}
}

// The protocol itself holds within the bounds each mutant is caught in,
// so each is caught for what it breaks.
func TestTheProtocolHoldsWhereEachMutantIsCaught(t *testing.T) {
	seen := map[Bounds]bool{}
	for _, mu := range Mutants() {
		b := mu.Needs(ciBounds())
		if seen[b] {
			continue
		}
		seen[b] = true
		m, err := New(b, "")
		require.NoError(t, err)
		r := m.Check(Options{Liveness: true})
		require.Empty(t, r.Violation, "bounds of %s:\n%s", mu, strings.Join(r.Trace, "\n"))
		require.True(t, r.Complete)
		t.Logf("bounds of %s: states=%d depth=%d in %s", mu, r.States, r.Depth, r.Elapsed)
	}
}

func TestTheCounterexampleIsTheShortestAndReadsAsSteps(t *testing.T) {
	m, err := New(ciBounds(), TurnNotDurable)
	require.NoError(t, err)
	r := m.Check(Options{})
	require.Equal(t, "one event per key at a time: k0/v2 passed its gate while k0/v1 had not settled", r.Violation)
	require.Equal(t, []string{
		"  1. worker 1 receives k0/v1 (copy 1)",
		"  2. worker 1 runs the pipeline for k0/v1: its turn; stopped to be decided outside the transaction",
		"  3. worker 2 receives k0/v2 (copy 2)",
		"  4. worker 2 runs the pipeline for k0/v2: its turn; stopped to be decided outside the transaction",
	}, r.Trace[:4])
	require.Equal(t, 4, r.Depth)
}

func TestLivenessFindsAStallNoSafetyCheckSees(t *testing.T) {
	m, err := New(ciBounds(), ClaimOutlivesProcess)
	require.NoError(t, err)
	safety := m.Check(Options{})
	require.Empty(t, safety.Violation, "a claim that outlives its process breaks no safety invariant")
	live := m.Check(Options{Liveness: true})
	require.Contains(t, live.Violation, "liveness: from here no run settles")
}

func TestWorkersAreSymmetric(t *testing.T) {
	m, err := New(ciBounds(), "")
	require.NoError(t, err)
	a := m.Initial()
	a.Copy[0] = leasedTo(0)
	a.Worker[0] = worker{Phase: run, Copy: 0, Msg: 0}
	b := m.Initial()
	b.Copy[0] = leasedTo(1)
	b.Worker[1] = worker{Phase: run, Copy: 0, Msg: 0}
	e := newEncoder(m)
	require.Equal(t, e.hash(&a), e.hash(&b), "which worker does it is one state")
	b.Copy[1] = leasedTo(0)
	require.NotEqual(t, e.hash(&a), e.hash(&b))
}

func TestBadBoundsAreNamed(t *testing.T) {
	b := DefaultBounds()
	b.Workers = 4
	_, err := New(b, "")
	require.EqualError(t, err, "model: --workers 4 is out of range 1..3")
	_, err = New(DefaultBounds(), "no-such")
	require.ErrorContains(t, err, `no mutant "no-such"`)
	b = DefaultBounds()
	b.Versions, b.Gap = 1, true
	_, err = New(b, "")
	require.ErrorContains(t, err, "--gap needs --versions of at least 2")
}

func TestMaxStatesStopsIncomplete(t *testing.T) {
	m, err := New(ciBounds(), "")
	require.NoError(t, err)
	r := m.Check(Options{MaxStates: 1000})
	require.False(t, r.Complete)
	require.Empty(t, r.Violation)
}
