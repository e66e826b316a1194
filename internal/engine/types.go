// Package engine is seqbox's consumer: the batch pipeline (inbox, ordering
// gate, handler, drain), the scheduler that keeps one batch per key in
// flight, the stager that runs agent decisions outside the transaction, and
// the operator actions. The root package seqbox is its public face; nothing
// here is a promise.
package engine

import (
	"github.com/seqbox/seqbox/internal/handoff"
	"github.com/seqbox/seqbox/seqboxtype"
)

// The public types the engine works with, named as seqbox names them.
type (
	// Config is seqbox.Config.
	Config = seqboxtype.Config
	// Event is seqbox.Event.
	Event = seqboxtype.Event
	// Result is seqbox.Result.
	Result = seqboxtype.Result
	// Identity is seqbox.Identity.
	Identity = seqboxtype.Identity
	// Oversized is seqbox.Oversized.
	Oversized = seqboxtype.Oversized
	// Metrics is seqbox.Metrics.
	Metrics = seqboxtype.Metrics
)

// invalidConfig names the field of a configuration a call cannot work with.
var invalidConfig = handoff.InvalidConfig
