// Package ride lets the result of a Decider's last effects-ledger call
// ride with its decision: the ledger leaves a succeeded call's record in
// the Decider's slot instead of writing it, and the decider writes it in
// the same commit as the decision (store.DecisionRecordParams.Effect), so
// that an agent's event costs one write after its call where it cost two
// (docs/design.md §11). A crash between the call and that commit leaves
// the row pending, as a crash between the call and its record did: its
// lease runs out and the next attempt reconciles it.
//
// Only one record rides at a time, the identity's own: a second call of
// the same Decider writes the first's record before it begins (the
// ledger's begin), and a call for another identity, or one made while a
// record already waits, writes its own.
package ride

import (
	"context"
	"sync"

	"github.com/seqbox/seqbox/store"
)

// Held is a succeeded call's record that waits in a slot.
type Held struct {
	// Params is the record, for store.DecisionRecordParams.Effect.
	Params store.EffectRecordParams
	// Record writes it alone, the ledger's way (a row no longer the
	// call's is refused), when it cannot ride: the Decider failed, or the
	// decision's record found the row changed.
	Record func(ctx context.Context) error
}

// Slot is one Decide call's place for a held record.
type Slot struct {
	consumer, source, id string
	mu                   sync.Mutex
	held                 *Held
	// closed: the Decider returned; a call that answers later (a
	// goroutine it left running) writes its own record.
	closed bool
}

type slotKey struct{}

// With returns ctx carrying a new slot for the decision of one identity.
func With(ctx context.Context, consumer, source, id string) (context.Context, *Slot) {
	s := &Slot{consumer: consumer, source: source, id: id}
	return context.WithValue(ctx, slotKey{}, s), s
}

// From returns ctx's slot, or nil outside a Decider.
func From(ctx context.Context) *Slot {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	return s
}

// Hold leaves h in the slot, and reports whether it did: not for another
// identity's call, nor while another record waits (the caller then
// writes h itself).
func (s *Slot) Hold(consumer, source, id string, h Held) bool {
	if s == nil || consumer != s.consumer || source != s.source || id != s.id {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil || s.closed {
		return false
	}
	s.held = &h
	return true
}

// Take empties the slot and returns what it held, nil if nothing.
func (s *Slot) Take() *Held {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held
	s.held = nil
	return h
}

// Close empties the slot for good, once the Decider returned, and
// returns what it held, nil if nothing: a record held later is refused
// (Hold), so none is left behind unwritten.
func (s *Slot) Close() *Held {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.Take()
}

// Flush writes what the slot holds, alone: before another call of the
// same Decider begins, so that a call never starts while an earlier
// one's result is unrecorded.
func (s *Slot) Flush(ctx context.Context) error {
	if h := s.Take(); h != nil {
		return h.Record(ctx)
	}
	return nil
}
