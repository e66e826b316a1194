// Package clitest builds and runs the seqbox binaries for the tests of
// cmd/seqbox and cmd/seqbox-lab, which drive them as a user would: as
// child processes.
package clitest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/stretchr/testify/require"
)

// Build builds the command in package directory pkg as name in a new
// temporary directory, and returns its path and what removes it; the
// build's output goes to stderr.
func Build(name, pkg string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", name+"-test-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build %s: %w", name, err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Environ is the test process's environment without the variable that
// would inject crashes into the child.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, fault.Env+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// RunChaos runs a bounded `chaos` of the binary exe, requires it to
// succeed, and returns its table.
func RunChaos(t *testing.T, exe string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append([]string{"chaos"}, args...)...)
	cmd.Env = Environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("%s chaos %s\n%s", filepath.Base(exe), strings.Join(args, " "), out.String())
	require.NoError(t, err, "stderr: %s", errOut.String())
	return out.String()
}

// Deps lists the packages the package in directory pkg links, one a line.
func Deps(t *testing.T, pkg string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	require.NoError(t, err, "go list -deps %s", pkg)
	return string(out)
}

// Emulators are the in-process brokers only seqbox-lab links.
var Emulators = []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/Admiral-Piett/goaws",
	"cloud.google.com/go/pubsub/v2/pstest", "github.com/nats-io/nats-server/v2"}

// Run is a TestMain's body for a package whose tests drive the command
// built from its directory: it builds the command as name into *bin, runs
// the tests, and then, when they passed and check is set, check (a leak
// check, say). It returns the exit code.
func Run(m *testing.M, name string, bin *string, check func() error) int {
	path, remove, err := Build(name, ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	*bin = path
	code := m.Run()
	if code == 0 && check != nil {
		if err := check(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}
