package main

// The tests in this package drive the seqbox-lab binary as a user would:
// built once in TestMain and run as a child process.

import (
	"fmt"
	"os"
	"testing"

	"github.com/seqbox/seqbox/internal/clitest"
)

// bin is the seqbox-lab binary under test.
var bin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seqbox-lab-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin, err = clitest.Build(dir, "seqbox-lab", "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
