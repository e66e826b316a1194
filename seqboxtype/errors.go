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
	Field  string
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
