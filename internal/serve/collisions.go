package serve

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Collision is one identity that arrived with two different payloads.
type Collision struct {
	Source       string  `json:"source"`
	ID           string  `json:"id"`
	PartitionKey string  `json:"partitionkey"`
	Reason       string  `json:"reason"`
	At           *string `json:"at"`
	// First is the payload recorded first (nil when retention purged it),
	// Second the colliding one, parked.
	First        *Payload `json:"first"`
	FirstOutcome string   `json:"first_outcome"`
	Second       Payload  `json:"second"`
	SecondHash   string   `json:"second_payload_hash"`
	// Diff lists the fields that differ from First to Second; null when
	// the two cannot be compared field by field (First purged, or not a
	// JSON object).
	Diff []FieldDiff `json:"diff"`
}

// MaxCollisions is how many collisions Collisions lists at most, the
// oldest: each colliding payload is kept once, but a producer that
// reuses ids could leave many.
const MaxCollisions = 10000

// Collisions reads consumer's parked collisions from ex (the oldest
// limit, at most MaxCollisions; more says whether others are parked), each with the payload its identity was first recorded
// with (when something still holds it) and the fields that differ: the
// admin API's and seqbox collisions' one reading. It reads the
// collisions and, for each, its identity's rows, never every parked
// message or dead letter: the console polls it, and with 100,000
// messages parked behind a blocked key and no collision it took 1.1–1.9
// s a call.
func Collisions(ctx context.Context, ex store.Executor, consumer string, limit int) (cs []Collision, more bool, err error) {
	if limit < 1 || limit > MaxCollisions {
		return nil, false, fmt.Errorf("collisions: limit %d: want 1 to %d", limit, MaxCollisions)
	}
	// One more than asked says whether more are parked.
	parked, err := ex.ParkedCollisionList(ctx, store.ParkedCollisionListParams{Consumer: consumer, Limit: limit + 1})
	if err != nil {
		return nil, false, err
	}
	if len(parked) > limit {
		parked, more = parked[:limit], true
	}
	out := []Collision{}
	for _, p := range parked {
		c := Collision{Source: p.Source, ID: p.ID, PartitionKey: p.PartitionKey, Reason: p.Detail, At: stamp(p.ParkedAt),
			Second: payload(p.Envelope), SecondHash: p.PayloadHash}
		first, outcome, err := firstPayload(ctx, ex, consumer, p)
		if err != nil {
			return nil, false, err
		}
		if first != nil {
			fp := payload(first)
			c.First = &fp
		}
		if d, ok := diffEnvelopes(first, p.Envelope); ok {
			c.Diff = d
		}
		c.FirstOutcome = outcome
		out = append(out, c)
	}
	return out, more, nil
}

// firstPayload finds the payload an identity was first recorded with:
// applied (the gateway kept it), parked (held or blocked) or dead-lettered.
func firstPayload(ctx context.Context, ex store.Executor, consumer string, c store.Parked) ([]byte, string, error) {
	seen, err := ex.InboxSeen(ctx, store.MessageRef{Consumer: consumer, Source: c.Source, ID: c.ID})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, "", err
	}
	outcome := string(seen.Outcome)
	env, ok, err := envelopeOf(ctx, ex, consumer, c.Source, c.ID)
	if err != nil || ok {
		return env, outcome, err
	}
	ref := store.MessageRef{Consumer: consumer, Source: c.Source, ID: c.ID}
	parked, err := ex.ParkedOfIdentity(ctx, ref)
	if err != nil {
		return nil, outcome, err
	}
	for _, p := range parked {
		if p.Reason != seqboxtype.ParkCollision {
			return p.Envelope, outcome, nil
		}
	}
	letters, err := ex.DeadLetterList(ctx, store.DeadLetterListParams{Consumer: consumer, All: true, Of: &store.Identity{Source: c.Source, ID: c.ID}})
	if err != nil {
		return nil, outcome, err
	}
	for i := len(letters) - 1; i >= 0; i-- {
		if letters[i].PayloadHash != c.PayloadHash {
			return letters[i].Envelope, outcome, nil
		}
	}
	return nil, outcome, nil
}
