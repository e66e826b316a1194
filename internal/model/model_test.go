package model

import (
	"sort"
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
		"decide-before-semantic-check", "ledger-no-pending",
		// Issue 36, classes 1 to 4, and the holes it found.
		"business-key-check-unlocked", "decision-not-bound", "turn-not-bound", "turn-without-way-out",
		"stale-check-skipped", "skip-records-no-gap", "skip-while-deciding", "unpark-past-turn"} {
		require.True(t, names[must], "mutant %s is listed", must)
	}
}

// ciBoundSets are every bounds CI explores: the CI bounds, each mutant's
// (Mutant.Needs), and the scenario variants that take the paths no
// mutant needs (ScenarioBounds).
func ciBoundSets() []Bounds {
	var out []Bounds
	seen := map[Bounds]bool{}
	add := func(b Bounds) {
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	add(ciBounds())
	for _, mu := range Mutants() {
		add(mu.Needs(ciBounds()))
	}
	for _, b := range ScenarioBounds() {
		add(b)
	}
	add(LostBusinessKeyBounds()) // an unkeyed turn lost with its business key
	return out
}

// The protocol itself holds within the bounds each mutant is caught in,
// and the scenario variants, so each mutant is caught for what it breaks;
// and every guard the model encodes is reached in one of them, so each
// is checked: a guard nobody reaches is not.
func TestTheProtocolHoldsWhereEachMutantIsCaught(t *testing.T) {
	reached := map[string]int{}
	for _, b := range ciBoundSets() {
		m, err := New(b, "")
		require.NoError(t, err)
		r := m.Check(Options{Liveness: true})
		require.Empty(t, r.Violation, "bounds %+v:\n%s", b, strings.Join(r.Trace, "\n"))
		require.True(t, r.Complete)
		t.Logf("%s: states=%d depth=%d in %s", b.Describe(), r.States, r.Depth, r.Elapsed)
		for g, n := range m.Reached() {
			reached[g] += n
		}
	}
	var unreached []string
	for g, n := range reached {
		if n == 0 {
			unreached = append(unreached, g)
		}
	}
	sort.Strings(unreached)
	// Two guards are defensive, and no bound reaches them (nor the
	// default bounds): nothing settles an identity while another worker
	// holds its live claim (docs/design.md §18.5). Any other guard left
	// unreached is unchecked, and fails here.
	require.Equal(t, []string{guardText[gDeadLetterSettled], guardText[gNackSettled]}, unreached,
		"guards no bound CI runs reaches: each is unchecked")
	require.Len(t, reached, int(nGuards))
}

// Issue 36 class 1: on PostgreSQL under READ COMMITTED, two events of
// one business key read it free at the same instant and both reach the
// agent, unless the business key's lock makes the check and the turn one
// step. The store without the lock breaks "a business key never reaches
// the agent twice"; with it (and on SQLite) the protocol holds.
func TestABusinessKeyCheckedWithoutItsLockReachesTheAgentTwice(t *testing.T) {
	b := BusinessKeyCheckUnlocked.Needs(ciBounds())
	require.True(t, b.Postgres)
	m, err := New(b, BusinessKeyCheckUnlocked)
	require.NoError(t, err)
	r := m.Check(Options{})
	require.Equal(t, "once at the agent: bk-dup reached the agent while the business key b0 (under k0/v1) was in flight or done there", r.Violation)
	require.Contains(t, strings.Join(r.Trace, "\n"), "runs the pipeline for bk-dup: its business key read free; its turn is written when the transaction commits")
	locked, err := New(b, "")
	require.NoError(t, err)
	require.Empty(t, locked.Check(Options{Liveness: true}).Violation)
}

// Issue 36 classes 2 and 3: a copy of an identity with another payload
// is a collision; without the binding it is applied with the decision
// made for the first copy, or sent to the agent under its identity.
func TestACopyWithAnotherPayloadIsBoundOut(t *testing.T) {
	for mu, want := range map[Mutant]string{
		DecisionNotBound: "bound to the payload: k0/v1' applied with the decision made for k0/v1",
		TurnNotBound:     "one identity, one payload at the agent: k0/v1' was sent under the identity whose agent already received k0/v1",
	} {
		m, err := New(mu.Needs(ciBounds()), mu)
		require.NoError(t, err)
		require.Equal(t, want, m.Check(Options{}).Violation, mu)
	}
}

// Issue 36 class 4: a turn whose message the broker lost holds its key's
// successors for good without the turn-ending rule (a stall, or no step
// at all); with it the sweep ends the turn.
func TestATurnWhoseMessageIsLostHasAWayOut(t *testing.T) {
	b := TurnWithoutWayOut.Needs(ciBounds())
	m, err := New(b, TurnWithoutWayOut)
	require.NoError(t, err)
	require.Contains(t, m.Check(Options{Liveness: true}).Violation, "k0/v2 has no final outcome")
	fixed, err := New(b, "")
	require.NoError(t, err)
	require.Empty(t, fixed.Check(Options{Liveness: true}).Violation)
	require.Positive(t, fixed.Reached()[guardText[gEndTurn]])
}

// A finding of the model (issue 36, class 4): an unkeyed event with a
// business key, lost while it held its turn, held that business key for
// good, since the sweep ended only turns a held message of the same key
// waited behind. The sweep now ends any turn not seen for the broker's
// redelivery window with no live claim (turn_end.go, endStaleTurns;
// TestLostUnkeyedTurnFreesItsBusinessKey in the root package), and the
// model with it finds no stall.
func TestALostUnkeyedTurnFreesItsBusinessKey(t *testing.T) {
	m, err := New(LostBusinessKeyBounds(), "")
	require.NoError(t, err)
	r := m.Check(Options{Liveness: true})
	require.Empty(t, r.Violation, "%s", strings.Join(r.Trace, "\n"))
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
