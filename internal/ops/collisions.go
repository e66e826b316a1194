package ops

import (
	"io"
	"time"
)

// CollisionRow is one parked collision as seqbox collisions lists it: an
// identity that came again with another payload.
type CollisionRow struct {
	// At is when the second payload was parked.
	At time.Time
	// Source, ID and PartitionKey are the identity's and its key's.
	Source, ID, PartitionKey string
	// FirstOutcome is the outcome the first payload reached ("" when
	// retention purged it).
	FirstOutcome string
	// Fields names the fields that differ, "" when the two payloads cannot
	// be compared field by field.
	Fields string
}

// WriteCollisionRows prints collisions as a table, oldest first.
func WriteCollisionRows(w io.Writer, rows []CollisionRow) error {
	t := newTable(w, "PARKED_AT", "SOURCE", "ID", "PARTITIONKEY", "FIRST_OUTCOME", "DIFFERS_IN")
	for _, r := range rows {
		t.row(timeText(r.At), r.Source, r.ID, r.PartitionKey, r.FirstOutcome, r.Fields)
	}
	return t.flush()
}
