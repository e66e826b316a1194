package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// rawSources are the tables seqbox writes a row of per applied message in
// `seqbox bench`: the inbox identity, the key's version, and the record
// handler's effect and object. The raw limit writes into copies of them.
var rawSources = []string{"seqbox_inbox", "seqbox_keys", "seqbox_record_effects", "seqbox_record_objects"}

// rawTables names the raw limit's copies of rawSources for one step of its
// search: bench_raw_<what>_<suffix>, in rawSources' order.
type rawTables struct{ inbox, keys, effects, objects string }

func rawTablesFor(suffix string) rawTables {
	n := func(what string) string { return "bench_raw_" + what + "_" + suffix }
	return rawTables{inbox: n("inbox"), keys: n("keys"), effects: n("effects"), objects: n("objects")}
}

func (r rawTables) names() []string { return []string{r.inbox, r.keys, r.effects, r.objects} }

// createRawTables creates r as copies of rawSources with everything each
// row costs: columns, defaults, constraints and indexes (the effects'
// auto-increment included). On PostgreSQL that is CREATE TABLE … (LIKE …
// INCLUDING ALL); SQLite has no LIKE, so its catalog's own statements for
// the table and its indexes run again under the copy's name. A copy made
// from the catalog follows every migration, so the limit cannot drift
// from the rows seqbox writes.
func createRawTables(ctx context.Context, db *sql.DB, pg bool, r rawTables) error {
	for i, to := range r.names() {
		from := rawSources[i]
		if pg {
			if _, err := db.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE %s (LIKE %s INCLUDING ALL)`, to, from)); err != nil {
				return fmt.Errorf("raw: copy %s: %w", from, err)
			}
			continue
		}
		if err := copySQLiteTable(ctx, db, from, to); err != nil {
			return err
		}
	}
	return nil
}

// copySQLiteTable creates to with from's statements from sqlite_master:
// the table first, then its indexes, each name holding from renamed.
func copySQLiteTable(ctx context.Context, db *sql.DB, from, to string) error {
	rows, err := db.QueryContext(ctx, `SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL
		ORDER BY type = 'table' DESC, name`, from)
	if err != nil {
		return fmt.Errorf("raw: read %s's schema: %w", from, err)
	}
	var stmts []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return fmt.Errorf("raw: read %s's schema: %w", from, err)
		}
		stmts = append(stmts, strings.ReplaceAll(s, from, to))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("raw: read %s's schema: %w", from, err)
	}
	if len(stmts) == 0 {
		return fmt.Errorf("raw: %s is not in the database", from)
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("raw: copy %s: %w", from, err)
		}
	}
	return nil
}

// dropRawTables drops r (those that exist).
func dropRawTables(ctx context.Context, db *sql.DB, r rawTables) error {
	for _, t := range r.names() {
		if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+t); err != nil {
			return fmt.Errorf("raw: drop %s: %w", t, err)
		}
	}
	return nil
}
