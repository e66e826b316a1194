package model

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestExplore runs one exploration for a person iterating on the model:
// MODEL_EXPLORE holds the bounds as JSON over SmallBounds (field names
// of Bounds), MODEL_MUTANT a mutant. Skipped without MODEL_EXPLORE.
func TestExplore(t *testing.T) {
	raw := os.Getenv("MODEL_EXPLORE")
	if raw == "" {
		t.Skip("set MODEL_EXPLORE to the bounds as JSON")
	}
	b := SmallBounds()
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatal(err)
	}
	mu := Mutant(os.Getenv("MODEL_MUTANT"))
	b = mu.Needs(b)
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatal(err)
	}
	m, err := New(b, mu)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Check(Options{Liveness: true})
	t.Logf("%s\nstates=%d depth=%d complete=%v in %s", b.Describe(), r.States, r.Depth, r.Complete, r.Elapsed)
	if r.Violation != "" {
		t.Logf("VIOLATION: %s\n%s", r.Violation, strings.Join(r.Trace, "\n"))
	}
	for g, n := range m.Reached() {
		if n == 0 {
			t.Logf("unreached: %s", g)
		}
	}
}
