package sqlite_test

import (
	"testing"

	"github.com/seqbox/seqbox/store/drivertest"
)

// TestDriver runs the driver suite on one SQLite file: its parallel
// transactions take turns at the store's one writer.
func TestDriver(t *testing.T) {
	drivertest.Run(t, openFresh)
}
