// Package dialect is seqbox's one record of how its SQL differs between
// the databases it runs on. seqbox writes its SQL once, with $n
// placeholders and syntax both databases share (ON CONFLICT … DO UPDATE
// and RETURNING included); what remains (column types, row-lock clauses)
// is spelled here, and so are the ids of the advisory locks seqbox takes
// on PostgreSQL (locks.go).
package dialect

import "strings"

// SQL is one database's spelling of the parts of seqbox's SQL that differ.
type SQL struct {
	// Name is "sqlite" or "postgres", for messages.
	Name string
	// Serial is the column type of an auto-increment primary key; DDL
	// writes it {{SERIAL}}.
	Serial string
	// Blob is the column type of raw bytes; DDL writes it {{BLOB}}.
	Blob string
	// LockRow is appended to a SELECT so that transactions on the rows it
	// reads serialize (empty on SQLite, where the write lock is taken at
	// BEGIN).
	LockRow string
	// LockRowSkip is appended to a SELECT that claims rows other
	// transactions have not locked (the queue's receive), skipping those
	// they have (empty on SQLite: one writer at a time).
	LockRowSkip string
	// SideTablesLock runs first in the transaction that creates the
	// tables beside seqbox's own (internal/ddl.Ensure), so that sessions
	// creating them at once take turns (empty on SQLite: one writer at a
	// time).
	SideTablesLock string
	// Positional says the driver binds anonymous ? placeholders faster
	// than the $n that seqbox's SQL is written with (SQLite: see
	// Positional), so statements are rewritten before they run.
	Positional bool
}

// SQLite is SQLite's spelling (modernc.org/sqlite).
var SQLite = SQL{
	Name:       "sqlite",
	Serial:     "INTEGER PRIMARY KEY AUTOINCREMENT",
	Blob:       "BLOB",
	Positional: true,
}

// Postgres is PostgreSQL's spelling (pgx).
var Postgres = SQL{
	Name:           "postgres",
	Serial:         "BIGSERIAL PRIMARY KEY",
	Blob:           "BYTEA",
	LockRow:        " FOR UPDATE",
	LockRowSkip:    " FOR UPDATE SKIP LOCKED",
	SideTablesLock: XactLock(SideTablesLock),
}

// Fill replaces the placeholders of DDL written for every database,
// {{SERIAL}} and {{BLOB}}, with this database's column types.
func (d SQL) Fill(ddl string) string {
	return strings.NewReplacer("{{SERIAL}}", d.Serial, "{{BLOB}}", d.Blob).Replace(ddl)
}
