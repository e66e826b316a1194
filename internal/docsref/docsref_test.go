package docsref

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every citation of the repository's comments and documents points at a
// section, heading, step, file or anchor that exists.
func TestDocsRefs(t *testing.T) {
	problems, err := Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("%d citations point nowhere", len(problems))
	}
}

// The checker reports each kind of citation that points nowhere, at its
// file and line, and nothing that exists.
func TestDocsRefsCheckerReports(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/design.md", `# The design

## §1. Promises

Steps: §5 step 8 exists, §5 step 9 does not.

## §5. The pipeline

8. **Ordering gate** (§6 is not a section).

### §5.1 A subsection
`)
	write("internal/x/x.go", `package x

// Good: docs/design.md §5, docs/design.md §1, §5.1, docs/design.md §5,
// "Ordering gate", docs/design.md, "The pipeline" and "Promises",
// internal/x/x.go, internal/x/..., and x.go.
//
// Bad: a section cited over two lines, docs/design.md
// §9; a name of another section, docs/design.md §1, "Promises", "Ordering gate";
// a step by number, step 8 of docs/design.md §5;
// a heading that is not one, docs/design.md, "No such heading";
// a file that is not one, internal/nowhere/y.go.
var s = "docs/design.md §42 in a string is code, not a citation"
`)
	write("README.md", `Good: [d](docs/design.md#5-the-pipeline), [x](internal/x/x.go).
Bad: [d](docs/design.md#nope), [m](docs/missing.md), and §5 with no document.
`)
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:2: docs/design.md has no heading #nope",
		"README.md:2: docs/missing.md does not exist",
		"README.md:2: §5 names no document",
		"docs/design.md:5: §5 has no step 9",
		"docs/design.md:9: docs/design.md §6 does not exist",
		"internal/x/x.go:8: docs/design.md §9 does not exist",
		`internal/x/x.go:8: "Ordering gate" is not a heading or bold lead-in of docs/design.md §1`,
		"internal/x/x.go:9: §5 cites a step by number",
		`internal/x/x.go:10: docs/design.md has no heading or bold lead-in "No such heading"`,
		"internal/x/x.go:11: internal/nowhere/y.go does not exist",
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("not reported: %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reported %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}
