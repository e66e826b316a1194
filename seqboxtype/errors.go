package seqboxtype

import (
	"errors"
	"fmt"
)

// ErrInvalidEvent is matched (with errors.Is) by every envelope validation
// error. The concrete error is an *InvalidEventError naming the field.
var ErrInvalidEvent = errors.New("invalid event")

// InvalidEventError says which envelope field is wrong and why.
type InvalidEventError struct {
	// Field names what is wrong: the attribute ("id"), a JSON path inside
	// data ("data.items[2].name"), or "envelope" for the whole document.
	// Error leaves it out when empty.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "invalid event: <field>: <reason>".
func (e *InvalidEventError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("invalid event: %s", e.Reason)
	}
	return fmt.Sprintf("invalid event: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidEvent) true.
func (e *InvalidEventError) Is(target error) bool { return target == ErrInvalidEvent }

func invalid(field, format string, args ...any) error {
	return &InvalidEventError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
