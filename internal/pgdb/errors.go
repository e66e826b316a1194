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
