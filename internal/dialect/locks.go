package dialect

import "strconv"

// Ids of the PostgreSQL advisory locks seqbox takes, all of them: each
// serializes one kind of DDL across sessions, for the rest of the
// transaction that takes it (XactLock). CREATE TABLE IF NOT EXISTS is not
// safe when two sessions run it at the same moment, and a migration must
// run once. The ids are part of seqbox's behaviour towards other seqbox
// processes on one database: never change or reuse one.
const (
	// StoreMigrationLock serializes the store's migrations (store/postgres).
	StoreMigrationLock int64 = 7357211
	// QueueMigrationLock serializes the creation of the embedded queue's
	// table (transport/embedded).
	QueueMigrationLock int64 = 7357212
	// SideTablesLock serializes the creation of the tables beside seqbox's
	// own, such as the built-in handlers' business tables (internal/ddl).
	SideTablesLock int64 = 7357213
	// BusinessKeyLockSeed seeds the hash that names a business key's
	// advisory lock (hashtextextended(consumer/businesskey, seed)):
	// a transaction holds it from its business-key check to its commit,
	// so that the check and the turn reserving the key are one step.
	BusinessKeyLockSeed int64 = 7357214
	// OutboxKeyLockSeed seeds the hash that names an outbox key's advisory
	// lock (hashtextextended(partitionkey, seed)): a transaction that
	// emits for a key holds it until it ends, so that a key's outbox seqs
	// commit in their order.
	OutboxKeyLockSeed int64 = 7357215
)

// XactLock is the statement that takes the advisory lock id until the
// transaction ends (PostgreSQL only).
func XactLock(id int64) string {
	return "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(id, 10) + ")"
}
