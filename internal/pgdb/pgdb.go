// Package pgdb opens PostgreSQL pools the way every seqbox component does,
// through pgx's database/sql driver.
package pgdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// IsURL reports whether s names a PostgreSQL database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open opens a pool to the database at url and checks that it answers.
// An unreachable server gives an error naming the host and the cause.
func Open(ctx context.Context, rawURL string) (*sql.DB, error) {
	host := "?"
	if u, err := url.Parse(rawURL); err == nil {
		host = u.Host
	}
	db, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", host, err)
	}
	db.SetMaxOpenConns(16)
	db.SetConnMaxIdleTime(time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres %s is unreachable: %w", host, err)
	}
	return db, nil
}

// Redact hides the password in a database URL, for messages.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}
