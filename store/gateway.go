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

// GatewayCopy is one copy of an identity offered at the gateway's ingest:
// its payload hash and when it came.
type GatewayCopy struct {
	Source, ID, PayloadHash string
	At                      time.Time
}

// GatewayAcceptParams are Executor.GatewayAccept's: the copies one ingest
// commit offers, in order (an identity may come more than once).
type GatewayAcceptParams struct {
	Consumer string
	Copies   []GatewayCopy
}

// GatewayAccepted is what became of one offered copy: New when it is its
// identity's first (now recorded, in the caller's transaction); else
// First is the copy recorded before it.
type GatewayAccepted struct {
	New   bool
	First GatewayCopy
}

// GatewayAcceptedPurgeParams are Executor.GatewayAcceptedPurge's.
type GatewayAcceptedPurgeParams struct {
	Consumer string
	// Before: identities first accepted before it go, oldest first.
	Before time.Time
	// Limit bounds the rows one call removes.
	Limit int
}

// GatewaySecretParams are Executor.GatewaySecret's.
type GatewaySecretParams struct {
	// Name names the secret ("effects-token").
	Name string
	// Candidate is kept when the secret has none yet (hex of random
	// bytes the caller drew).
	Candidate string
	At        time.Time
}
