// Package pythonsdk holds the Go tests of the Python SDK: its unittest
// suite, run against a real seqbox serve, and docs/agents.md's Python
// quick start, pasted as it is. They make `go test ./...` (CI's command)
// cover the SDK.
package pythonsdk

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/internal/shorttest"
)

// TestPythonSDKSuite runs `python3 -m unittest discover sdk/python` from
// the checkout's root; without python3 it fails under CI=true.
func TestPythonSDKSuite(t *testing.T) {
	shorttest.Skip(t, "the Python SDK's suite (it builds and runs seqbox serve)")
	pastetest.Need(t, "the Python SDK's suite", "python3")
	pastetest.Need(t, "the Python SDK's suite", "go")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-m", "unittest", "discover", "-v", "sdk/python")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest discover sdk/python: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("the suite did not end OK:\n%s", out)
	}
	t.Logf("%s", out)
}

// The markers of docs/agents.md's two blocks.
const (
	startMarker = "<!-- python quick start: "
	endMarker   = "<!-- python quick start, the end: "
)

// TestAgentsPythonQuickStartRunsAsPasted pastes docs/agents.md's Python
// quick start into bash, in a copy of the checkout, as a reader does
// (pastetest.RunAgent).
func TestAgentsPythonQuickStartRunsAsPasted(t *testing.T) {
	shorttest.Skip(t, "docs/agents.md's Python quick start (it builds and runs seqbox serve)")
	for _, p := range []string{"bash", "go", "python3", "curl"} {
		pastetest.Need(t, "the Python quick start", p)
	}
	pastetest.RunAgent(t, filepath.Join("..", ".."), pastetest.Agent{
		Doc: filepath.Join("..", "..", "docs", "agents.md"), Start: startMarker, End: endMarker,
		Done: "agent: evt-1 done: refund refund-1, email email-2", Wait: 3 * time.Minute,
		Once: []string{"model: asked to plan evt-1", `refund: refund-1 {"amount": 20, "event": "evt-1", "key": "order-7", "order": "order-7"} (key sbx-`,
			`email: email-2 {"event": "evt-1", "key": "order-7", "order": "order-7", "refund": "refund-1", "to": "customer@example.com"} (key sbx-`},
	})
}
