package pgdb

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// StorageFull reports whether err is a PostgreSQL error of SQLSTATE class
// 53 (insufficient resources: disk full, out of memory) or 58 (system
// error: I/O): the server's disk is full or failing.
func StorageFull(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "58")
}

// Refused reports whether err carries the server's ERROR answer to a
// statement: the statement failed and its transaction (a pipeline's
// implicit one) was rolled back, nothing of it committed. A FATAL or
// PANIC answer, or no answer at all (the connection lost), leaves the
// commit unknown and is not a refusal.
func Refused(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.SeverityUnlocalized == "ERROR" || (pe.SeverityUnlocalized == "" && pe.Severity == "ERROR")
}
