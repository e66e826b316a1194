package typescriptsdk

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/nodetest"
	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/internal/waitfor"
)

// The markers of docs/agents.md's two TypeScript blocks.
const (
	startMarker = "<!-- typescript quick start: "
	endMarker   = "<!-- typescript quick start, the end: "
)

// TestAgentsTypeScriptQuickStartRunsAsPasted pastes docs/agents.md's
// TypeScript quick start into bash, in a copy of the checkout (without
// node_modules: the block's npm ci installs them): the first block, then,
// once the agent printed the event done, the second. Only the ports
// differ (GATEWAY and AGENT, which the block reads), and go install
// writes into a GOPATH of the test's.
func TestAgentsTypeScriptQuickStartRunsAsPasted(t *testing.T) {
	shorttest.Skip(t, "docs/agents.md's TypeScript quick start (it builds and runs seqbox serve)")
	nodetest.Need(t, "the TypeScript quick start")
	for _, p := range []string{"bash", "go", "curl"} {
		pastetest.Need(t, "the TypeScript quick start", p)
	}
	blocks := pastetest.Blocks(t, filepath.Join("..", "..", "docs", "agents.md"), startMarker, endMarker)
	start, end := blocks[0], blocks[1]
	clone, _, env := pastetest.Clone(t, filepath.Join("..", ".."))
	gateway, agent := pastetest.FreePort(t), pastetest.FreePort(t)
	bash := pastetest.StartBash(t, clone, append(env, "GATEWAY="+gateway, "AGENT="+agent)...)
	bash.Paste(start)
	done := "agent: evt-1 done: refund refund-1, email email-2"
	waitfor.That(t, 4*time.Minute, "the agent to print the event done", func() bool {
		return strings.Contains(bash.Printed(), done)
	})
	bash.Paste(end)
	bash.End(time.Minute)
	got := bash.Printed()
	for _, want := range []string{"model: asked to plan evt-1", `refund: refund-1 {"amount":20,"event":"evt-1","key":"order-7","order":"order-7"} (key sbx-`,
		`email: email-2 {"event":"evt-1","key":"order-7","order":"order-7","refund":"refund-1","to":"customer@example.com"} (key sbx-`, done} {
		if strings.Count(got, want) != 1 {
			t.Errorf("the output has %q %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
}
