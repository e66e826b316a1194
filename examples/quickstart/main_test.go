package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs the program in a directory of its own, so app.db is new.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "seqbox-quickstart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	source, err := os.ReadFile("main.go")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	readmeHasSource = bytes.Contains(readme, append(append([]byte("```go\n"), source...), "```"...))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var readmeHasSource bool

// The README's quick start is this program, byte for byte.
func TestREADMEQuickStartIsThisProgram(t *testing.T) {
	if !readmeHasSource {
		t.Fatal("README.md's quick start differs from examples/quickstart/main.go: copy main.go into the README's ```go block")
	}
}

func Example() {
	main()
	// Output:
	// delivery 1: applied
	// delivery 2: duplicate
	// crm_tasks rows: 1
}
