package model

import (
	"fmt"
	"time"
)

// Options tune one exploration.
type Options struct {
	// MaxStates stops the exploration (as incomplete) past this many
	// distinct states; 0 is no limit.
	MaxStates int
	// Liveness also checks that every reachable state can still settle.
	Liveness bool
	// Progress, when set, is called every 100,000 states.
	Progress func(states, depth int)
	// Stop, when set, is polled every 100,000 states; true stops the
	// exploration as incomplete (an interrupt).
	Stop func() bool
}

// Result is what an exploration found.
type Result struct {
	States      int // distinct canonical states
	Depth       int // the longest shortest path, in steps
	Transitions int
	// Complete is false when MaxStates stopped the exploration.
	Complete bool
	// Violation is the first broken invariant ("" for none); Trace is the
	// shortest run that breaks it, one numbered step a line.
	Violation string
	Trace     []string
	Elapsed   time.Duration
}

// Violations is 0 or 1: the checker stops at the first (shortest) one.
func (r Result) Violations() int {
	if r.Violation == "" {
		return 0
	}
	return 1
}

// node is a discovered state: the state it was first reached from and
// the step that reached it.
type node struct {
	parent int32
	st     step
}

// Check explores every state reachable within the bounds, breadth first,
// and stops at the first violation, which therefore has a shortest
// trace.
func (m *Model) Check(opt Options) Result {
	start := time.Now()
	enc := newEncoder(m)
	init := m.Initial()
	seen := map[uint64]int32{enc.hash(&init): 0}
	nodes := []node{{parent: -1}}
	var offsets []int32 // edges of node n: targets[offsets[n]:offsets[n+1]]
	var targets []int32
	var settled []bool
	res := Result{Complete: true}
	level, levelStart := []State{init}, 0
	reported := 0
	for depth := 0; len(level) > 0; depth++ {
		res.Depth = depth
		var next []State
		for j := range level {
			n := int32(levelStart + j)
			s := &level[j]
			offsets = append(offsets, int32(len(targets)))
			fanout := 0
			var bad *State
			var badNode int32
			m.successors(s, func(st step, t *State) {
				fanout++
				res.Transitions++
				m.checkState(t)
				h := enc.hash(t)
				id, ok := seen[h]
				if !ok {
					id = int32(len(nodes))
					seen[h] = id
					nodes = append(nodes, node{parent: n, st: st})
					next = append(next, *t)
					if t.Violation.Code != okay && bad == nil {
						c := *t
						bad, badNode = &c, id
					}
				}
				targets = append(targets, id)
			})
			settled = append(settled, m.unfinished(s) < 0)
			if bad != nil {
				return m.report(res, nodes, badNode, m.describe(bad.Violation), start)
			}
			if fanout == 0 && !settled[n] {
				v := violation{Code: vDeadlock, A: int8(m.unfinished(s)), B: -1}
				return m.report(res, nodes, n, m.describe(v), start)
			}
			if opt.MaxStates > 0 && len(nodes) > opt.MaxStates || (opt.Stop != nil && n%100000 == 0 && opt.Stop()) {
				res.Complete = false
				res.States = len(nodes)
				res.Elapsed = time.Since(start)
				return res
			}
			if opt.Progress != nil && len(nodes)/100000 > reported {
				reported = len(nodes) / 100000
				opt.Progress(len(nodes), depth)
			}
		}
		levelStart += len(level)
		level = next
	}
	offsets = append(offsets, int32(len(targets)))
	res.States = len(nodes)
	if opt.Liveness {
		if stuck := stuckNode(offsets, targets, settled); stuck >= 0 {
			s := m.replay(nodes, stuck)
			v := violation{Code: vNeverSettles, A: int8(m.unfinished(&s)), B: -1}
			return m.report(res, nodes, stuck, m.describe(v), start)
		}
	}
	res.Elapsed = time.Since(start)
	return res
}

// stuckNode returns the first state (in breadth-first order, so the
// nearest to the start) from which no settled state is reachable, or -1.
// It walks the edges backwards from every settled state.
func stuckNode(offsets, targets []int32, settled []bool) int32 {
	n := len(settled)
	indeg := make([]int32, n+1)
	for _, t := range targets {
		indeg[t+1]++
	}
	for i := 1; i <= n; i++ {
		indeg[i] += indeg[i-1]
	}
	from := make([]int32, len(targets))
	fill := append([]int32(nil), indeg[:n]...)
	for src := range n {
		for _, t := range targets[offsets[src]:offsets[src+1]] {
			from[fill[t]] = int32(src)
			fill[t]++
		}
	}
	reach := make([]bool, n)
	var queue []int32
	for i, ok := range settled {
		if ok {
			reach[i] = true
			queue = append(queue, int32(i))
		}
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, src := range from[indeg[t]:indeg[t+1]] {
			if !reach[src] {
				reach[src] = true
				queue = append(queue, src)
			}
		}
	}
	for i, ok := range reach {
		if !ok {
			return int32(i)
		}
	}
	return -1
}

// path returns the steps from the initial state to node n.
func path(nodes []node, n int32) []step {
	var out []step
	for ; nodes[n].parent >= 0; n = nodes[n].parent {
		out = append(out, nodes[n].st)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// replay re-runs the steps to node n and returns its state.
func (m *Model) replay(nodes []node, n int32) State {
	s := m.Initial()
	for _, st := range path(nodes, n) {
		s, _ = m.apply1(&s, st)
	}
	return s
}

// apply1 takes step st from s.
func (m *Model) apply1(s *State, st step) (State, bool) {
	var out State
	found := false
	m.successors(s, func(x step, t *State) {
		if x == st && !found {
			out, found = *t, true
		}
	})
	if !found {
		panic(fmt.Sprintf("model: step %+v is not enabled on replay", st))
	}
	m.checkState(&out)
	return out, true
}

// report fills in the violation and its trace.
func (m *Model) report(res Result, nodes []node, n int32, what string, start time.Time) Result {
	res.States = len(nodes)
	res.Violation = what
	s := m.Initial()
	steps := path(nodes, n)
	res.Depth = len(steps)
	for k, st := range steps {
		t, _ := m.apply1(&s, st)
		res.Trace = append(res.Trace, fmt.Sprintf("%3d. %s", k+1, m.stepText(st, &s, &t)))
		s = t
	}
	res.Trace = append(res.Trace, "     state: "+m.summary(&s))
	res.Elapsed = time.Since(start)
	return res
}
