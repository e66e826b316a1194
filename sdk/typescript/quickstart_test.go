package typescriptsdk

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/nodetest"
	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/internal/shorttest"
)

// The markers of docs/agents.md's two TypeScript blocks.
const (
	startMarker = "<!-- typescript quick start: "
	endMarker   = "<!-- typescript quick start, the end: "
)

// TestAgentsTypeScriptQuickStartRunsAsPasted pastes docs/agents.md's
// TypeScript quick start into bash, in a copy of the checkout (without
// node_modules: the block's npm ci installs them), as a reader does
// (pastetest.RunAgent).
func TestAgentsTypeScriptQuickStartRunsAsPasted(t *testing.T) {
	shorttest.Skip(t, "docs/agents.md's TypeScript quick start (it builds and runs seqbox serve)")
	nodetest.Need(t, "the TypeScript quick start")
	for _, p := range []string{"bash", "go", "curl"} {
		pastetest.Need(t, "the TypeScript quick start", p)
	}
	pastetest.RunAgent(t, filepath.Join("..", ".."), pastetest.Agent{
		Doc: filepath.Join("..", "..", "docs", "agents.md"), Start: startMarker, End: endMarker,
		Done: "agent: evt-1 done: refund refund-1, email email-2", Wait: 4 * time.Minute,
		Once: []string{"model: asked to plan evt-1", `refund: refund-1 {"amount":20,"event":"evt-1","key":"order-7","order":"order-7"} (key sbx-`,
			`email: email-2 {"event":"evt-1","key":"order-7","order":"order-7","refund":"refund-1","to":"customer@example.com"} (key sbx-`},
	})
}
