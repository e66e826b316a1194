package store

import "time"

// GatewayEnvelope is the envelope of an event the gateway's handler
// applied (seqbox serve), kept so that a collision can be shown with both
// payloads.
type GatewayEnvelope struct {
	Consumer, Source, ID string
	Envelope             []byte
	BusinessKey          string
	AppliedAt            time.Time
}

// GatewayEnvelopePurgeParams are Executor.GatewayEnvelopePurge's.
type GatewayEnvelopePurgeParams struct {
	Consumer string
	// Before: envelopes applied before it go, oldest first.
	Before time.Time
	// Now is the time their tombstones record.
	Now time.Time
	// Limit bounds the envelopes one call removes.
	Limit int
}

// GatewayTombstoneTakeParams are Executor.GatewayTombstoneTake's.
type GatewayTombstoneTakeParams struct {
	Consumer string
	IDs      []Identity
}

// GatewayTombstonePurgeParams are Executor.GatewayTombstonePurge's.
type GatewayTombstonePurgeParams struct {
	Consumer string
	// Before: tombstones of purges before it go.
	Before time.Time
}
