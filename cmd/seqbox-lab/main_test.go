package main

// The tests in this package drive the seqbox-lab binary as a user would:
// built once in TestMain and run as a child process.

import (
	"os"
	"testing"

	"github.com/seqbox/seqbox/internal/clitest"
)

// bin is the seqbox-lab binary under test.
var bin string

func TestMain(m *testing.M) {
	os.Exit(clitest.Run(m, "seqbox-lab", &bin, nil))
}
