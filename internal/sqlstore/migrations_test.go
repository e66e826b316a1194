package sqlstore

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/stretchr/testify/require"
)

// testdata/migrations.golden.json holds the Go string literals the store's
// migrations were before they moved to migrations/*.sql. Each file's SQL is
// that literal byte for byte, and runs as the very same statements.
func TestMigrationFilesAreTheOldLiterals(t *testing.T) {
	b, err := os.ReadFile("testdata/migrations.golden.json")
	require.NoError(t, err)
	var old []string
	require.NoError(t, json.Unmarshal(b, &old))
	require.GreaterOrEqual(t, len(migrations), len(old), "a migration file went missing")
	for i, m := range migrations[:len(old)] {
		require.Equal(t, i+1, m.Version, m.File)
		require.Equal(t, old[i], m.SQL, m.File)
		for _, d := range []dialect.SQL{dialect.SQLite, dialect.Postgres} {
			// What the earlier migrate executed, statement by statement.
			var ran []string
			for _, part := range strings.Split(strings.NewReplacer("{{SERIAL}}", d.Serial, "{{BLOB}}", d.Blob).Replace(old[i]), ";") {
				if strings.TrimSpace(part) != "" {
					ran = append(ran, part)
				}
			}
			require.Equal(t, ran, ddl.Statements(d, m.SQL), "%s on %s", m.File, d.Name)
		}
	}
}

// Every upgrade follows a migration the store has.
func TestUpgradesFollowMigrations(t *testing.T) {
	for v := range upgrades {
		require.True(t, v >= 2 && v <= len(migrations), "upgrade %d follows no migration (a database at version 1 or more is the earliest it may look at)", v)
	}
}
