package effects

import "errors"

// definiteError marks an error after which the remote side certainly did
// not apply the effect.
type definiteError struct{ err error }

func (e definiteError) Error() string { return "definite failure: " + e.err.Error() }
func (e definiteError) Unwrap() error { return e.err }

// Definite wraps an error the remote side gave when it certainly did not
// apply the effect (a validation error, a 4xx refusal). The ledger records
// the call as failed, and another attempt may call again. Any error not
// wrapped this way is treated as uncertain: a timeout, a reset connection
// or a 5xx may have applied it.
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
