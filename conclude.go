package seqbox

import (
	"fmt"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Conclude is what a Handler returns when the system it writes to says the
// event is already superseded, which the version gate could not know: an
// agent answering 409 because its object is newer. outcome is Stale or
// VersionConflict. The handler's writes roll back; the identity is kept
// with that outcome (a redelivery is a duplicate), the audit records the
// reason, the message is neither retried nor dead-lettered, and its key
// moves to the event's version, so its successors are not held behind
// it. Any other outcome makes the delivery fail permanently.
func Conclude(outcome seqboxtype.Outcome, reason string) error {
	if outcome != seqboxtype.Stale && outcome != seqboxtype.VersionConflict {
		return Permanent(fmt.Errorf("seqbox.Conclude(%q): a handler may conclude with only %s or %s", outcome, seqboxtype.Stale, seqboxtype.VersionConflict))
	}
	return &concludedError{Outcome: outcome, Reason: reason}
}

// concludedError is the error Conclude returns: the handler ends the
// message with Outcome (stale or version_conflict) for Reason.
type concludedError struct {
	Outcome seqboxtype.Outcome
	Reason  string
}

func (e *concludedError) Error() string { return fmt.Sprintf("concluded %s: %s", e.Outcome, e.Reason) }
