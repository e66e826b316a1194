// Package reach lets seqbox's own commands, gateway, chaos harness and test
// suites call the parts of a seqbox.Consumer that are not its public API:
// its store, one sweep, one pass over operator requests, a retention purge,
// an oversized input recorded as rejected, and the gauges. The root package
// sets these when it is initialised; c is always a *seqbox.Consumer.
package reach

import (
	"context"

	"github.com/seqbox/seqbox/internal/handoff"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

var (
	// Store is the consumer's store.
	Store func(c any) store.Store
	// Sweep ends holds that reached HoldTimeout and keys blocked past
	// MaxBlock, once, and returns what it applied or blocked.
	Sweep func(c any, ctx context.Context) ([]seqboxtype.Result, error)
	// RunRequests runs the pending operator requests addressed to the
	// consumer and reports how many it ran.
	RunRequests func(c any, ctx context.Context) (int, error)
	// Purge removes identities whose retention ended, batch at a time, and
	// reports how many.
	Purge func(c any, ctx context.Context, batch int) (int64, error)
	// DeliverOversized records an input larger than MaxEventSize as
	// rejected (replay's one huge line).
	DeliverOversized func(c any, ctx context.Context, o handoff.Oversized) ([]seqboxtype.Result, error)
	// RefreshMetrics sets the gauges from the store.
	RefreshMetrics func(c any, ctx context.Context) error
)
