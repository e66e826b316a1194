package cli

// Progress of the long commands (chaos, bench) on stderr: on a terminal a
// line that each update rewrites in place; elsewhere only the lines that
// say a step ended, so that a log shows a long run moving.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/bench"
	"github.com/seqbox/seqbox/internal/chaos"
)

// progressEvery is how often a terminal's progress line is rewritten at
// most.
const progressEvery = 250 * time.Millisecond

// isTerminal reports whether w is a terminal (a character device, as a
// tty is).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && fi.Mode()&os.ModeNamedPipe == 0
}

// progress writes progress to w. With terminal set, show rewrites one
// line in place (a carriage return, the line, an erase to its end) at
// most every progressEvery; without it, show writes nothing. done writes
// a line that stays, in both cases.
type progress struct {
	w        io.Writer
	terminal bool
	mu       sync.Mutex
	shown    bool // a line is shown and not yet cleared
	last     time.Time
	// phase is the bench phase that runs, and at when it was reported,
	// for tick.
	phase bench.Phase
	at    time.Time
}

// show rewrites the progress line (on a terminal only).
func (p *progress) show(line string) {
	if !p.terminal {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown && time.Since(p.last) < progressEvery {
		return
	}
	p.last, p.shown = time.Now(), true
	fmt.Fprint(p.w, "\r"+line+"\x1b[K")
}

// clear erases the progress line, before other output.
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// done writes a line that stays, in place of the progress line.
func (p *progress) done(line string) {
	p.clear()
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, line)
}

// Write writes lines that stay (such as chaos --verbose's), after
// clearing the progress line.
func (p *progress) Write(b []byte) (int, error) {
	p.clear()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// chaosProgress is the progress line of a chaos scenario.
func chaosProgress(p chaos.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: scenario %d/%d %s, %s: %d messages pending", p.Index, p.Total, p.Scenario, p.Phase, p.Pending)
	if p.Kills >= 0 {
		fmt.Fprintf(&b, ", %d kill", p.Kills)
		if p.Kills != 1 {
			b.WriteString("s")
		}
	}
	fmt.Fprintf(&b, ", %s", p.Elapsed.Round(time.Second))
	return b.String()
}

// benchProgress is the line of a bench phase: while it runs, or, once it
// is done, what it measured.
func benchProgress(p bench.Phase) string {
	switch {
	case p.Done:
		return fmt.Sprintf("bench: %s: %s (%s)", p.Name, p.Result, p.Elapsed.Round(100*time.Millisecond))
	case p.Step != "":
		return fmt.Sprintf("bench: %s: %s, %s", p.Name, p.Step, p.Elapsed.Round(time.Second))
	}
	return fmt.Sprintf("bench: %s, %s", p.Name, p.Elapsed.Round(time.Second))
}

// onPhase shows a bench phase: its steps on a terminal, its end always.
func (p *progress) onPhase(ph bench.Phase) {
	p.mu.Lock()
	p.phase, p.at = ph, time.Now()
	p.mu.Unlock()
	if ph.Done {
		p.done(benchProgress(ph))
		return
	}
	p.show(benchProgress(ph))
}

// tick rewrites a running bench phase's line every second on a terminal,
// so that its time moves between its steps, until stop is closed.
func (p *progress) tick(stop <-chan struct{}) {
	if !p.terminal {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			ph, at := p.phase, p.at
			p.mu.Unlock()
			if ph.Name != "" && !ph.Done {
				ph.Elapsed += time.Since(at)
				p.show(benchProgress(ph))
			}
		}
	}
}
