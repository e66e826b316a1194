package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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
var upgrades = map[int]upgrade{
	10: legacyGateway,
}

// legacyGatewayTables are the tables an earlier seqbox serve created on
// the store's pool, at run time, before migration 10 made them seqbox's:
// each with exactly the columns serve gave it, and the table of migration
// 10 that takes its rows.
var legacyGatewayTables = []struct {
	name, into string
	columns    []Column
}{
	{"gateway_envelopes", "seqbox_gateway_envelopes", []Column{
		{Name: "ident", Type: "text", PrimaryKey: true},
		{Name: "consumer", Type: "text", NotNull: true},
		{Name: "source", Type: "text", NotNull: true},
		{Name: "id", Type: "text", NotNull: true},
		{Name: "envelope", Type: "text", NotNull: true},
		{Name: "applied_at", Type: "bigint", NotNull: true},
		{Name: "businesskey", Type: "text", NotNull: true},
	}},
	{"gateway_tombstones", "seqbox_gateway_tombstones", []Column{
		{Name: "ident", Type: "text", PrimaryKey: true},
		{Name: "consumer", Type: "text", NotNull: true},
		{Name: "purged_at", Type: "bigint", NotNull: true},
	}},
}

// legacyGateway takes over seqbox serve's gateway_envelopes and
// gateway_tombstones: their rows move into migration 10's
// seqbox_gateway_… tables and they are dropped (their indexes with them).
// Only when both are there, each with exactly the columns serve gave it:
// a table of either name that is anything else is an application's, and
// is left as it is.
func legacyGateway(ctx context.Context, tx *sql.Tx, d Dialect) (func(context.Context, *sql.Tx) error, error) {
	if d.Legacy == nil {
		return nil, nil
	}
	var moves []string
	for _, l := range legacyGatewayTables {
		t, err := d.Legacy(ctx, tx, l.name)
		if err != nil {
			return nil, fmt.Errorf("look for seqbox serve's %s: %w", l.name, err)
		}
		if t == nil || !sameColumns(t.Columns, l.columns) {
			return nil, nil
		}
		names := make([]string, len(l.columns))
		for i, c := range l.columns {
			names[i] = c.Name
		}
		cols := strings.Join(names, ", ")
		moves = append(moves,
			`INSERT INTO `+l.into+` (`+cols+`) SELECT `+cols+` FROM `+t.Name,
			`DROP TABLE `+t.Name)
	}
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range moves {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("take over seqbox serve's gateway tables: %.60s…: %w", q, err)
			}
		}
		return nil
	}, nil
}

// sameColumns reports whether a table's columns are want, in order: the
// same names, types and primary key, and NOT NULL on the same columns
// outside the primary key (SQLite lets a TEXT primary key hold NULL,
// PostgreSQL does not).
func sameColumns(got, want []Column) bool {
	if len(got) != len(want) {
		return false
	}
	for i, g := range got {
		w := want[i]
		if g.Name != w.Name || g.Type != w.Type || g.PrimaryKey != w.PrimaryKey || (!w.PrimaryKey && g.NotNull != w.NotNull) {
			return false
		}
	}
	return true
}

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
