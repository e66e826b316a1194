package seqbox

import (
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/handlerkind"
)

// seqbox's own commands, gateway, chaos harness and suites reach a
// Consumer's internals through these, never through the public API.
func init() {
	fault.Install = func(c any, hook fault.Hook) { c.(*Consumer).setHooks(hook) }
	handlerkind.Set = func(c any, kind string) { c.(*Consumer).setKind(kind) }
}
