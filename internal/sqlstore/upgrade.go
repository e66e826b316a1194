package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Table describes a table as Dialect.Legacy found it.
type Table struct {
	// Name reaches the table from SQL run in the migration transaction
	// after Dialect.Enter: quoted, and schema-qualified where the
	// database has schemas.
	Name string
	// Columns are the table's columns in order.
	Columns []Column
}

// Column is one column of a Table.
type Column struct {
	// Name is the column's name.
	Name string
	// Type is the column's type as the database spells it, lower-case
	// ("text", "bigint").
	Type string
	// NotNull says the column refuses NULL.
	NotNull bool
	// PrimaryKey says the column is part of the table's primary key.
	PrimaryKey bool
}

// An upgrade is the Go part of migration v, for what an earlier seqbox
// left in a database that was at a schema version from 1 to v-1 when the
// open began (a database seqbox never migrated holds nothing of an earlier
// seqbox: it is never looked at). It runs in the migration transaction
// before Dialect.Enter, where names resolve as they do on the store's
// pool, and only reads. The step it returns (nil: nothing to do) runs in
// the same transaction right after migration v's SQL, so that the whole
// migration commits or fails as one.
type upgrade func(ctx context.Context, tx *sql.Tx, d Dialect) (step func(ctx context.Context, tx *sql.Tx) error, err error)

// upgrades are the store's upgrades by the version whose SQL they follow.
var upgrades = map[int]upgrade{}

// pendingSteps runs, before Dialect.Enter, the upgrades of the versions a
// database at schema version from migrates through, and returns the steps
// they asked for by version.
func pendingSteps(ctx context.Context, tx *sql.Tx, d Dialect, from int) (map[int]func(context.Context, *sql.Tx) error, error) {
	steps := map[int]func(context.Context, *sql.Tx) error{}
	if from < 1 {
		return steps, nil
	}
	for v, up := range upgrades {
		if v <= from {
			continue
		}
		step, err := up(ctx, tx, d)
		if err != nil {
			return nil, fmt.Errorf("migration %d: %w", v, err)
		}
		if step != nil {
			steps[v] = step
		}
	}
	return steps, nil
}
