package pgdb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestStorageFull(t *testing.T) {
	for code, want := range map[string]bool{
		"53100": true,  // disk_full
		"53200": true,  // out_of_memory
		"58030": true,  // io_error
		"23505": false, // unique_violation
		"40001": false, // serialization_failure
	} {
		err := fmt.Errorf("write: %w", &pgconn.PgError{Code: code})
		if got := StorageFull(err); got != want {
			t.Errorf("StorageFull(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
	if StorageFull(errors.New("plain")) {
		t.Error("a plain error is not a full disk")
	}
}
