// Package sqlitedb opens SQLite files the way every seqbox component must:
// WAL, synchronous=FULL, BEGIN IMMEDIATE and a busy timeout, so that several
// processes can share one file without SQLITE_BUSY surprises.
package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ListTables lists the user tables of a SQLite database.
const ListTables = `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`

// Open opens (creating if needed) the SQLite file at path with seqbox's
// durability settings, and checks that it really is a SQLite database.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: empty database path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("sqlite: directory of %s does not exist", path)
		}
	}
	if err := checkOwner(ctx, path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %s is not a usable SQLite database: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, MetaTable); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %s: create seqbox_meta: %w", path, err)
	}
	return db, nil
}

// MetaTable creates the table that marks a database as seqbox's.
const MetaTable = sqlstore.MetaTable

// checkOwner opens an existing file read-only and refuses it when it is not
// SQLite or holds tables but no seqbox_meta, before any pragma can change it.
func checkOwner(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	if os.IsNotExist(err) || (err == nil && st.Size() == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if st.IsDir() {
		return fmt.Errorf("sqlite: %s is a directory, not a database file", path)
	}
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer ro.Close()
	rows, err := ro.QueryContext(ctx, ListTables)
	if err != nil {
		return fmt.Errorf("%w: %s is not a SQLite database (%v); refusing to touch it", store.ErrForeignDatabase, path, err)
	}
	defer rows.Close()
	var names []string
	seqbox := false
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return err
		}
		seqbox = seqbox || n == "seqbox_meta"
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", store.ErrForeignDatabase, path, err)
	}
	if len(names) > 0 && !seqbox {
		if len(names) > 3 {
			names = append(names[:3], "…")
		}
		return fmt.Errorf("%w: %s has tables (%s) and no seqbox_meta table; refusing to touch it",
			store.ErrForeignDatabase, path, strings.Join(names, ", "))
	}
	return nil
}
