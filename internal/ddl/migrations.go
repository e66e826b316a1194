package ddl

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/seqbox/seqbox/internal/dialect"
)

// Migration is one numbered step of a schema, read from a file named
// NNN_what.sql: NNN is its version (1, 2, 3, … with no gap), what says
// what it does.
//
// A file is written once for every database: {{SERIAL}} and {{BLOB}}
// stand for the column types dialect.SQL.Fill puts in. It may start with
// comment lines ("-- …") that describe the step; they are not run. What
// follows, less the file's final newline, is the step's SQL: statements
// separated by ';' (so no statement may contain one).
type Migration struct {
	// Version is the number the file name starts with.
	Version int
	// File is the file's name.
	File string
	// SQL is the step's statements, as written.
	SQL string
}

// Load reads the migrations in directory dir of fsys, in version order,
// and checks that the versions run 1, 2, 3 … with no gap and no
// duplicate, and that every file in dir is a migration.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	byVersion := map[int]Migration{}
	for _, e := range entries {
		v, err := versionOf(e.Name())
		if err != nil || e.IsDir() {
			return nil, fmt.Errorf("migrations: %s/%s is not a migration (NNN_what.sql)", dir, e.Name())
		}
		if prev, ok := byVersion[v]; ok {
			return nil, fmt.Errorf("migrations: %s and %s both have version %d", prev.File, e.Name(), v)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		byVersion[v] = Migration{Version: v, File: e.Name(), SQL: body(string(b))}
	}
	out := make([]Migration, len(byVersion))
	for v, m := range byVersion {
		if v > len(out) {
			return nil, fmt.Errorf("migrations: %s has version %d, but there are %d migrations: a version is missing", m.File, v, len(out))
		}
		out[v-1] = m
	}
	for _, m := range out {
		if strings.TrimSpace(m.SQL) == "" {
			return nil, fmt.Errorf("migrations: %s has no SQL", m.File)
		}
	}
	return out, nil
}

// MustLoad is Load for migrations embedded in the binary, where an error
// is a bug: it panics.
func MustLoad(fsys fs.FS, dir string) []Migration {
	m, err := Load(fsys, dir)
	if err != nil {
		panic(err)
	}
	return m
}

// versionOf parses the version a file name NNN_what.sql starts with.
func versionOf(name string) (int, error) {
	num, rest, ok := strings.Cut(name, "_")
	if !ok || !strings.HasSuffix(rest, ".sql") || len(rest) == len(".sql") || strings.Trim(num, "0123456789") != "" {
		return 0, fmt.Errorf("bad name")
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("bad version")
	}
	return v, nil
}

// body drops a file's leading comment lines and its final newline.
func body(file string) string {
	for strings.HasPrefix(file, "--") {
		_, rest, ok := strings.Cut(file, "\n")
		if !ok {
			return ""
		}
		file = rest
	}
	return strings.TrimSuffix(file, "\n")
}

// Statements is what running text on d executes: the placeholders filled
// in, split at ';', blank pieces dropped; each statement otherwise as
// written.
func Statements(d dialect.SQL, text string) []string {
	var out []string
	for _, s := range strings.Split(d.Fill(text), ";") {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// Exec runs the Statements of text on d in tx, in order, and returns the
// first error as the driver gave it.
func Exec(ctx context.Context, tx *sql.Tx, d dialect.SQL, text string) error {
	for _, s := range Statements(d, text) {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
