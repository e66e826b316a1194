package postgres_test

import (
	"testing"

	"github.com/seqbox/seqbox/store/drivertest"
)

// TestDriver runs the driver suite on a schema of its own (pgtest: in CI
// a missing server fails the test instead of skipping it).
func TestDriver(t *testing.T) {
	drivertest.Run(t, open)
}
