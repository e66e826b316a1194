package chaos

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// goroutineHeader is the first line of a goroutine in a Go traceback:
// its number (and, in a crash dump, its g and m), its state, with how long it has been blocked once that
// is a minute or more ("chan receive, 2 minutes").
var goroutineHeader = regexp.MustCompile(`^goroutine \d+ (?:[^[]* )?\[([^\]]*)\]:$`)

// stuckStacks picks from a Go goroutine dump (what SIGQUIT makes a Go
// program write) the goroutines blocked a minute or more with seqbox's
// own code on their stack: for a stall's post-mortem, the waits that
// hold it. Each is given by its state and its seqbox frames; identical
// ones are given once with their count, the most frequent first, within
// max bytes in all.
func stuckStacks(dump string, max int) string {
	type stack struct {
		text string
		n    int
	}
	seen := map[string]*stack{}
	var order []*stack
	for _, g := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		m := goroutineHeader.FindStringSubmatch(lines[0])
		if m == nil || !strings.Contains(m[1], "minute") {
			continue
		}
		state := m[1][:strings.LastIndex(m[1], ",")]
		var frames []string
		for i := 1; i+1 < len(lines); i += 2 {
			fn, at := lines[i], strings.TrimSpace(lines[i+1])
			if !strings.HasPrefix(fn, "github.com/seqbox/seqbox") {
				continue
			}
			// The function without its arguments (pointers, which differ
			// between goroutines of one stack), at its file's base name.
			if j := strings.LastIndex(fn, "("); j > 0 {
				fn = fn[:j]
			}
			if j := strings.LastIndex(at, " +0x"); j > 0 {
				at = at[:j]
			}
			at = at[strings.LastIndex(at, "/")+1:]
			frames = append(frames, "    "+fn+" "+at)
		}
		if len(frames) == 0 {
			continue
		}
		text := state + "]\n" + strings.Join(frames, "\n")
		if s := seen[text]; s != nil {
			s.n++
			continue
		}
		s := &stack{text: text, n: 1}
		seen[text] = s
		order = append(order, s)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].n > order[j].n })
	var b strings.Builder
	for _, s := range order {
		entry := fmt.Sprintf("  ×%d [%s\n", s.n, s.text)
		if b.Len()+len(entry) > max {
			fmt.Fprintf(&b, "  (more left out)\n")
			break
		}
		b.WriteString(entry)
	}
	return b.String()
}

// stuckReport makes every live serve process write its goroutines
// (SIGQUIT, which ends it) and gives those blocked a minute or more, per
// process: said by a stall, before the processes are stopped.
func (s *serveRun) stuckReport() string {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		if p == nil || p.exited() {
			continue
		}
		stuck := stuckStacks(p.quit(10*time.Second), 6<<10)
		if stuck == "" {
			stuck = "  none\n"
		}
		fmt.Fprintf(&b, "\n%s's goroutines blocked a minute or more (SIGQUIT):\n%s", p.name, stuck)
	}
	return b.String()
}
