package dialect

import "testing"

// The statements are what seqbox ran before the ids moved here; another
// seqbox process on the same database must take the very same locks.
func TestLocksAsBefore(t *testing.T) {
	for id, want := range map[int64]string{
		StoreMigrationLock: "SELECT pg_advisory_xact_lock(7357211)",
		QueueMigrationLock: "SELECT pg_advisory_xact_lock(7357212)",
		SideTablesLock:     "SELECT pg_advisory_xact_lock(7357213)",
	} {
		if got := XactLock(id); got != want {
			t.Errorf("XactLock(%d) = %q, want %q", id, got, want)
		}
	}
}

func TestFill(t *testing.T) {
	const ddl = "CREATE TABLE t (seq {{SERIAL}}, b {{BLOB}} NOT NULL, c {{BLOB}})"
	for d, want := range map[string]string{
		SQLite.Fill(ddl):   "CREATE TABLE t (seq INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB NOT NULL, c BLOB)",
		Postgres.Fill(ddl): "CREATE TABLE t (seq BIGSERIAL PRIMARY KEY, b BYTEA NOT NULL, c BYTEA)",
	} {
		if d != want {
			t.Errorf("Fill = %q, want %q", d, want)
		}
	}
}

// Postgres's side-tables lock is the one locks.go names.
func TestSideTablesLock(t *testing.T) {
	if Postgres.SideTablesLock != XactLock(SideTablesLock) {
		t.Errorf("Postgres.SideTablesLock = %q, want %q", Postgres.SideTablesLock, XactLock(SideTablesLock))
	}
	if SQLite.SideTablesLock != "" {
		t.Errorf("SQLite.SideTablesLock = %q, want none", SQLite.SideTablesLock)
	}
}
