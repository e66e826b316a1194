// Package nodetest gives Go tests the TypeScript SDK (sdk/typescript):
// Node.js and npm found, its dependencies installed once even when
// several test processes ask at the same time, and its code compiled
// where a test wants it.
package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/seqbox/seqbox/internal/pastetest"
)

// MinNode is the oldest Node.js major version the SDK supports.
const MinNode = 20

// Need finds node (MinNode or later) and npm; without them the test
// fails under CI=true and is skipped elsewhere.
func Need(t *testing.T, what string) {
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
	if major < MinNode {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s needs Node.js %d or later; node is %s", what, MinNode, v)
		}
		t.Skipf("%s needs Node.js %d or later; node is %s (CI fails here instead)", what, MinNode, v)
	}
}

// Install runs `npm ci` in the package at dir when its node_modules is
// missing. Test processes that ask for the same dir at once take turns
// (a lock file in the temporary directory), so one installs and the
// others find it done.
func Install(t *testing.T, dir string) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "seqbox-npm-ci-"+hex.EncodeToString(sum[:8])+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(filepath.Join(abs, "node_modules", ".package-lock.json")); err == nil {
		return
	}
	NPM(t, abs, "ci", "--no-audit", "--no-fund")
}

// Compile compiles the package at dir (installed) with its tsconfig into
// out, leaving its own dist alone, so tests that run at once do not
// write over each other's output.
func Compile(t *testing.T, dir, out string) {
	t.Helper()
	NPM(t, dir, "exec", "--", "tsc", "-p", ".", "--outDir", out)
}

// NPM runs npm with args in dir and returns what it printed; it fails
// the test when npm does.
func NPM(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("npm", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}
