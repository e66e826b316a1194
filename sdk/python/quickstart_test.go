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
	"github.com/seqbox/seqbox/internal/waitfor"
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
// quick start into bash, in a copy of the checkout: the first block,
// then, once the agent printed the event done, the second. Only the
// ports differ (GATEWAY and AGENT, which the block reads), and go
// install writes into a GOPATH of the test's.
func TestAgentsPythonQuickStartRunsAsPasted(t *testing.T) {
	shorttest.Skip(t, "docs/agents.md's Python quick start (it builds and runs seqbox serve)")
	for _, p := range []string{"bash", "go", "python3", "curl"} {
		pastetest.Need(t, "the Python quick start", p)
	}
	blocks := pastetest.Blocks(t, filepath.Join("..", "..", "docs", "agents.md"), startMarker, endMarker)
	start, end := blocks[0], blocks[1]
	clone, _, env := pastetest.Clone(t, filepath.Join("..", ".."))
	gateway, agent := pastetest.FreePort(t), pastetest.FreePort(t)
	bash := pastetest.StartBash(t, clone, append(env, "GATEWAY="+gateway, "AGENT="+agent)...)
	bash.Paste(start)
	done := "agent: evt-1 done: refund refund-1, email email-2"
	waitfor.That(t, 3*time.Minute, "the agent to print the event done", func() bool {
		return strings.Contains(bash.Printed(), done)
	})
	bash.Paste(end)
	bash.End(time.Minute)
	got := bash.Printed()
	for _, want := range []string{"model: asked to plan evt-1", `refund: refund-1 {"amount": 20, "event": "evt-1", "key": "order-7", "order": "order-7"} (key sbx-`,
		`email: email-2 {"event": "evt-1", "key": "order-7", "order": "order-7", "refund": "refund-1", "to": "customer@example.com"} (key sbx-`, done} {
		if strings.Count(got, want) != 1 {
			t.Errorf("the output has %q %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
}
