package effects

import "errors"

// definiteError marks an error after which the remote side certainly did
// not apply the effect, and another attempt cannot help.
type definiteError struct{ err error }

func (e definiteError) Error() string { return "definite failure: " + e.err.Error() }
func (e definiteError) Unwrap() error { return e.err }

// notAppliedError marks a transient error after which the remote side
// certainly did not apply the effect.
type notAppliedError struct{ err error }

func (e notAppliedError) Error() string { return e.err.Error() }
func (e notAppliedError) Unwrap() error { return e.err }

// Definite wraps an error the remote side gave when it certainly did not
// apply the effect and will not on another attempt (a validation error, a
// 4xx refusal), or a request that can never be sent. The ledger records
// the call as failed, and another attempt may call again.
//
// An error wrapped neither with Definite nor with NotApplied is treated
// as uncertain: a timeout, a reset connection or a 5xx may have applied
// it.
func Definite(err error) error {
	if err == nil {
		return nil
	}
	return definiteError{err: err}
}

// IsDefinite reports whether err was wrapped with Definite.
func IsDefinite(err error) bool {
	var d definiteError
	return errors.As(err, &d)
}

// NotApplied wraps a transient error after which the remote side
// certainly did not apply the effect: an answer that says the request was
// not processed (429, 408, or a 503 from a remote side whose contract says
// so), or a request that never left the process (the dial was refused,
// the context ended before a connection was had). The ledger records the
// call as failed, not uncertain, so nobody has to reconcile a call that
// never happened; the error stays transient (the message is retried, and
// the next attempt calls again under the same key). A RetryAfter inside
// err is kept.
func NotApplied(err error) error {
	if err == nil {
		return nil
	}
	return notAppliedError{err: err}
}

// IsNotApplied reports whether err says the remote side certainly did not
// apply the effect: it was wrapped with NotApplied or with Definite.
func IsNotApplied(err error) bool {
	var n notAppliedError
	return IsDefinite(err) || errors.As(err, &n)
}
