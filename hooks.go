package seqbox

import (
	"context"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/handlerkind"
	"github.com/seqbox/seqbox/internal/handoff"
	"github.com/seqbox/seqbox/internal/reach"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// seqbox's own commands, gateway, chaos harness and suites reach a
// Consumer's internals through these, never through the public API.
func init() {
	fault.Install = func(c any, hook fault.Hook) { c.(*Consumer).setHooks(hook) }
	handlerkind.Set = func(c any, kind string) { c.(*Consumer).setKind(kind) }
	reach.Store = func(c any) store.Store { return c.(*Consumer).cfg.Store }
	reach.Sweep = func(c any, ctx context.Context) ([]seqboxtype.Result, error) { return c.(*Consumer).sweep(ctx) }
	reach.RunRequests = func(c any, ctx context.Context) (int, error) { return c.(*Consumer).runRequests(ctx) }
	reach.Purge = func(c any, ctx context.Context, batch int) (int64, error) { return c.(*Consumer).purge(ctx, batch) }
	reach.DeliverOversized = func(c any, ctx context.Context, o handoff.Oversized) ([]seqboxtype.Result, error) {
		return c.(*Consumer).deliverOversized(ctx, o)
	}
	reach.RefreshMetrics = func(c any, ctx context.Context) error { return c.(*Consumer).refreshMetrics(ctx) }
}
