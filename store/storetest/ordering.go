package storetest

import (
	"testing"
)

// exerciseOrdering runs the ordering scenarios of the seed ("Teste as
// inversões antes da produção") against a store, through the public
// pipeline only. Every scenario checks the business result, not just the
// log: final object state and version, the effects in commit order, the
// accepted and refused messages with their outcomes, and the audit
// evidence.
func exerciseOrdering(t *testing.T, open Factory) {
	t.Run("InOrder", func(t *testing.T) { ordInOrder(t, open) })
	t.Run("OutOfOrder132", func(t *testing.T) { ordOutOfOrder(t, open) })
	t.Run("DuplicateVersion", func(t *testing.T) { ordDuplicate(t, open) })
	t.Run("MissingVersionHeld", func(t *testing.T) { ordMissingVersion(t, open) })
	t.Run("GapPolicyAdvance", func(t *testing.T) { ordGapAdvance(t, open) })
	t.Run("PermanentFailureBlock", func(t *testing.T) { ordPermanentBlock(t, open) })
	t.Run("PermanentFailureRelease", func(t *testing.T) { ordPermanentRelease(t, open) })
	t.Run("TransientFailureNeverOvertaken", func(t *testing.T) { ordTransient(t, open) })
	t.Run("RestartDuringVersion3", func(t *testing.T) { ordRestart(t, open) })
	t.Run("LostWriteConfirmation", func(t *testing.T) { ordLostConfirmation(t, open) })
	t.Run("TwoProducersOneKey", func(t *testing.T) { ordTwoProducers(t, open) })
	t.Run("HotKey", func(t *testing.T) { ordHotKey(t, open) })
	t.Run("BusinessDeadline", func(t *testing.T) { ordDeadline(t, open) })
	t.Run("PersonEditsObject", func(t *testing.T) { ordPersonEdits(t, open) })
	t.Run("FirstVersion", func(t *testing.T) { ordFirstVersion(t, open) })
	t.Run("StringObjectVersion", func(t *testing.T) { ordStringVersion(t, open) })
	t.Run("MaxBlock", func(t *testing.T) { ordMaxBlock(t, open) })
	t.Run("PED4821", func(t *testing.T) { ordPED4821(t, open) })
	t.Run("OpportunityRepublished", func(t *testing.T) { ordOpportunity(t, open) })
	t.Run("Property", func(t *testing.T) { exerciseOrderingProperty(t, open) })
}
