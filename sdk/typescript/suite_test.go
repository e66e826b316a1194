// Package typescriptsdk holds the Go tests of the TypeScript SDK: its
// node:test suite (npm test: tsc, then the tests against a real seqbox
// serve) and docs/agents.md's TypeScript quick start, pasted as it is.
// They make `go test ./...` (CI's command) cover the SDK.
package typescriptsdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/internal/shorttest"
)

// minNode is the oldest Node.js major version the SDK supports.
const minNode = 20

// needNode finds node (minNode or later) and npm; without them the test
// fails under CI=true and is skipped elsewhere.
func needNode(t *testing.T, what string) {
	t.Helper()
	pastetest.Need(t, what, "node")
	pastetest.Need(t, what, "npm")
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	v := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if err != nil {
		t.Fatalf("node --version printed %q", v)
	}
	if major < minNode {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s needs Node.js %d or later; node is %s", what, minNode, v)
		}
		t.Skipf("%s needs Node.js %d or later; node is %s (CI fails here instead)", what, minNode, v)
	}
}

// TestTypeScriptSDKSuite runs `npm test` in sdk/typescript (after `npm
// ci` when node_modules is missing): tsc, then the node:test suite
// against a real seqbox serve it builds from this checkout.
func TestTypeScriptSDKSuite(t *testing.T) {
	shorttest.Skip(t, "the TypeScript SDK's suite (it builds and runs seqbox serve)")
	needNode(t, "the TypeScript SDK's suite")
	pastetest.Need(t, "the TypeScript SDK's suite", "go")
	if _, err := os.Stat("node_modules"); os.IsNotExist(err) {
		npm(t, "ci", "--no-audit", "--no-fund")
	}
	out := npm(t, "test")
	if !strings.Contains(out, "\n# fail 0\n") || strings.Contains(out, "\n# pass 0\n") {
		t.Fatalf("npm test did not pass every test:\n%s", out)
	}
	for _, n := range []string{"# skipped ", "# todo ", "# cancelled "} {
		if !strings.Contains(out, "\n"+n+"0\n") {
			t.Fatalf("npm test left tests out (%s):\n%s", strings.TrimSpace(n), out)
		}
	}
	t.Logf("%s", out)
}

// npm runs npm with args in sdk/typescript and returns what it printed.
func npm(t *testing.T, args ...string) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
