// Package storetest is the conformance suite every seqbox store passes: one
// suite, run once per store, in the way river's riverdrivertest is. Every
// inbox and ordering behaviour is exercised here through the public
// pipeline (seqbox.Consumer), so a store that passes behaves like every
// other.
//
// A store package runs it from its own test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Exercise(t, func(t *testing.T) store.Store { return openFresh(t) })
//	}
package storetest

import (
	"testing"

	"github.com/seqbox/seqbox/store"
)

// Factory opens a fresh, empty store for one test and arranges for it to be
// closed when the test ends.
type Factory func(t *testing.T) store.Store

// Exercise runs the whole conformance suite against the stores open makes.
func Exercise(t *testing.T, open Factory) {
	t.Run("Inbox", func(t *testing.T) { exerciseInbox(t, open) })
	t.Run("Ordering", func(t *testing.T) { exerciseOrdering(t, open) })
	t.Run("Finish", func(t *testing.T) { exerciseFinish(t, open) })
	t.Run("Hardening", func(t *testing.T) { exerciseHardening(t, open) })
	t.Run("API", func(t *testing.T) { exerciseAPI(t, open) })
}
