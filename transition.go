package seqbox

import "github.com/seqbox/seqbox/seqboxtype"

// TRANSITIONAL: removed before issue 20 lands.
type (
	Event             = seqboxtype.Event
	Result            = seqboxtype.Result
	Identity          = seqboxtype.Identity
	InvalidEventError = seqboxtype.InvalidEventError
	Outcome           = seqboxtype.Outcome
)

// TRANSITIONAL.
const (
	Applied           = seqboxtype.Applied
	Duplicate         = seqboxtype.Duplicate
	Collision         = seqboxtype.Collision
	SemanticDuplicate = seqboxtype.SemanticDuplicate
	Stale             = seqboxtype.Stale
	VersionConflict   = seqboxtype.VersionConflict
	Held              = seqboxtype.Held
	Expired           = seqboxtype.Expired
	Blocked           = seqboxtype.Blocked
	Retry             = seqboxtype.Retry
	DeadLettered      = seqboxtype.DeadLettered
	Rejected          = seqboxtype.Rejected
	MaxEventSize      = seqboxtype.MaxEventSize
	MaxAttributeSize  = seqboxtype.MaxAttributeSize
)

// TRANSITIONAL.
var ErrInvalidEvent = seqboxtype.ErrInvalidEvent

// ParseEvent TRANSITIONAL.
func ParseEvent(raw []byte) (Event, error) { return seqboxtype.ParseEvent(raw) }

// Outcomes TRANSITIONAL.
func Outcomes() []Outcome { return seqboxtype.Outcomes() }
