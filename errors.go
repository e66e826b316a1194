package seqbox

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is matched by every Config validation error.
var ErrInvalidConfig = errors.New("invalid config")

// invalidConfig names the field of a configuration that cannot be used,
// and why.
func invalidConfig(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// ErrPastDeadline is matched by the effects ledger's refusal to make a
// new call for an event past its business deadline (Config.MaxAge); a
// call made before the deadline is still resolved. The decider then ends
// the event expired, or dead-letters it when another call of it took
// effect or may have (docs/design.md §10.1).
var ErrPastDeadline = errors.New("past the event's business deadline: no new call is made")

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (p *permanentError) Error() string { return "permanent: " + p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// Permanent wraps err so the pipeline dead-letters the delivery at once
// instead of retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError asks for a retry no sooner than After.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.err, e.after)
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps a transient err with the delay the remote side asked
// for (HTTP 429 or 503 with Retry-After): the attempt counts as any
// transient failure, and the next one comes no sooner than after, within
// Retry.MaxBackoff. RetryAfter(nil, d) is nil.
func RetryAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: after}
}

// RetryAfterOf returns the delay a RetryAfter error in err's chain asked
// for, and whether there is one.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}
