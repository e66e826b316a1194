package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/sqlitedb"
)

// Pages is where a run's writes went on SQLite, page by page: each frame
// its commits appended to the WAL is one page of one table or index
// written again, so the frames a tree took say what its rows cost the
// one writer (`seqbox bench agent --pages N`; docs/benchmarks.md, "Work
// per event").
type Pages struct {
	// Units are the run's events.
	Units int
	// Frames are the WAL frames the run appended, and Commits the write
	// transactions that appended them.
	Frames, Commits int
	// Trees are the frames by table or index, the most first ("(free)"
	// for a page no tree held at the end).
	Trees []TreeFrames
}

// TreeFrames are the WAL frames one table or index took.
type TreeFrames struct {
	Name   string
	Frames int
}

// Lines renders the pages as `seqbox bench agent --pages top` prints
// them: a summary line, then the top trees.
func (p Pages) Lines(run string, top int) []string {
	per := func(n int) float64 { return float64(n) / float64(max(p.Units, 1)) }
	out := []string{fmt.Sprintf("agent pages: run=%s units=%d frames=%d frames_per_unit=%.2f commits_per_unit=%.2f",
		run, p.Units, p.Frames, per(p.Frames), per(p.Commits))}
	for _, t := range p.Trees[:min(top, len(p.Trees))] {
		out = append(out, fmt.Sprintf("  frames=%d per_unit=%.2f %s", t.Frames, per(t.Frames), t.Name))
	}
	return out
}

// pageMeter counts the WAL frames a stretch of a run appends.
type pageMeter struct {
	db      string
	release func()
	// from is the WAL's frames before the stretch, under salts.
	from  int
	salts [2]uint32
}

// holdPages, when on, holds SQLite's checkpoints (sqlitedb.HoldCheckpoints)
// so that the pools opened next keep every frame in the WAL; begin then
// marks where a measured stretch starts, count counts it, and end ends
// the hold. A nil meter measures nothing.
func holdPages(db string, on bool) (*pageMeter, error) {
	if !on {
		return nil, nil
	}
	if pgdb.IsURL(db) {
		return nil, fmt.Errorf("pages: SQLite only")
	}
	t, err := sqlitedb.Locate(db)
	if err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	if t.Path == "" {
		return nil, fmt.Errorf("pages: %s is in memory: the WAL of a database file is counted", db)
	}
	release, ok := sqlitedb.HoldCheckpoints()
	if !ok {
		return nil, fmt.Errorf("pages: another run holds SQLite's checkpoints")
	}
	return &pageMeter{db: db, release: release}, nil
}

// begin marks the frames written so far as before the measured stretch.
func (m *pageMeter) begin() error {
	if m == nil {
		return nil
	}
	w, err := sqlitedb.ReadWAL(m.db, 0)
	m.from, m.salts = w.Frames, w.Salts
	return err
}

// end ends the hold: the pools opened after it checkpoint again.
func (m *pageMeter) end() {
	if m != nil {
		m.release()
	}
}

// count counts the frames appended since begin by tree.
func (m *pageMeter) count(ctx context.Context, units int) (Pages, error) {
	if m == nil {
		return Pages{}, nil
	}
	w, err := sqlitedb.ReadWAL(m.db, m.from)
	if err != nil {
		return Pages{}, err
	}
	if w.Salts != m.salts && m.from > 0 || w.Frames < m.from {
		return Pages{}, fmt.Errorf("pages: the WAL started over during the run: something checkpointed it, another process " +
			"or a pool opened before the hold (--pages counts a database only this run writes)")
	}
	trees, err := sqlitedb.PageTrees(ctx, m.db)
	if err != nil {
		return Pages{}, err
	}
	by := map[string]int{}
	for _, pg := range w.Pages {
		name, ok := trees[pg]
		if !ok {
			name = "(free)"
		}
		by[name]++
	}
	p := Pages{Units: units, Frames: len(w.Pages), Commits: w.Commits}
	for name, n := range by {
		p.Trees = append(p.Trees, TreeFrames{Name: name, Frames: n})
	}
	slices.SortFunc(p.Trees, func(a, b TreeFrames) int { return cmp.Or(cmp.Compare(b.Frames, a.Frames), cmp.Compare(a.Name, b.Name)) })
	return p, nil
}
