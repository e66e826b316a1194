// Package typescriptsdk holds the Go tests of the TypeScript SDK: its
// node:test suite (npm test: tsc, then the tests against a real seqbox
// serve) and docs/agents.md's TypeScript quick start, pasted as it is.
// They make `go test ./...` (CI's command) cover the SDK.
package typescriptsdk

import (
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/nodetest"
	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/internal/shorttest"
)

// TestTypeScriptSDKSuite runs `npm test` in sdk/typescript (after `npm
// ci` when node_modules is missing): tsc, then the node:test suite
// against a real seqbox serve it builds from this checkout.
func TestTypeScriptSDKSuite(t *testing.T) {
	shorttest.Skip(t, "the TypeScript SDK's suite (it builds and runs seqbox serve)")
	nodetest.Need(t, "the TypeScript SDK's suite")
	pastetest.Need(t, "the TypeScript SDK's suite", "go")
	nodetest.Install(t, ".")
	out := nodetest.NPM(t, ".", "test")
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
