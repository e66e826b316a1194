package store

import "time"

// GatewayEnvelope is the envelope of an event the gateway's handler
// applied (seqbox serve), kept so that a collision can be shown with both
// payloads.
type GatewayEnvelope struct {
	// Consumer, Source and ID are the event's identity.
	Consumer, Source, ID string
	// Envelope is the event's envelope (seqboxtype.Event.Raw).
	Envelope []byte
	// BusinessKey is the event's businesskey ("" for none).
	BusinessKey string
	// AppliedAt is when it was applied: GatewayEnvelopePurge goes by it.
	AppliedAt time.Time
}

// GatewayEnvelopePurgeParams are Executor.GatewayEnvelopePurge's.
type GatewayEnvelopePurgeParams struct {
	// Consumer is the consumer whose envelopes go.
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
	// Consumer is the consumer whose tombstones are looked up.
	Consumer string
	// IDs are the identities delivered again, whose tombstones go.
	IDs []Identity
}

// GatewayTombstonePurgeParams are Executor.GatewayTombstonePurge's.
type GatewayTombstonePurgeParams struct {
	// Consumer is the consumer whose tombstones go.
	Consumer string
	// Before: tombstones of purges before it go.
	Before time.Time
}

// GatewayCopy is one copy of an identity offered at the gateway's ingest:
// its payload hash and when it came.
type GatewayCopy struct {
	// Source and ID are the copy's identity, PayloadHash the hash of its
	// payload (seqboxtype.Event.Hash).
	Source, ID, PayloadHash string
	// At is when it came to ingest.
	At time.Time
}

// GatewayAcceptParams are Executor.GatewayAccept's: the copies one ingest
// commit offers, in order (an identity may come more than once).
type GatewayAcceptParams struct {
	// Consumer is the gateway's consumer.
	Consumer string
	// Copies are the copies offered, in order.
	Copies []GatewayCopy
}

// GatewayAccepted is what became of one offered copy: New when it is its
// identity's first (now recorded, in the caller's transaction); else
// First is the copy recorded before it.
type GatewayAccepted struct {
	// New is true when the copy is its identity's first.
	New bool
	// First is the identity's first copy: this one when New, else the one
	// recorded before it (its payload hash and time).
	First GatewayCopy
}

// GatewayAcceptedPurgeParams are Executor.GatewayAcceptedPurge's.
type GatewayAcceptedPurgeParams struct {
	// Consumer is the consumer whose accepted identities go.
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
	// At is when Candidate is recorded, if it is kept.
	At time.Time
}
