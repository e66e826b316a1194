package storetest

import (
	"testing"
)

func exerciseInbox(t *testing.T, open Factory) {
	t.Run("FailureWindows", func(t *testing.T) { exerciseFailureWindows(t, open) })
	t.Run("Identity", func(t *testing.T) { exerciseIdentity(t, open) })
	t.Run("Retention", func(t *testing.T) { exerciseRetention(t, open) })
	t.Run("Failures", func(t *testing.T) { exerciseFailures(t, open) })
	t.Run("Rejected", func(t *testing.T) { exerciseRejected(t, open) })
	t.Run("RedriveRejected", func(t *testing.T) { exerciseRedriveRejected(t, open) })
	t.Run("RedriveOneWithoutIdentity", func(t *testing.T) { exerciseRedriveOneWithoutIdentity(t, open) })
	t.Run("Concurrency", func(t *testing.T) { exerciseConcurrency(t, open) })
}
