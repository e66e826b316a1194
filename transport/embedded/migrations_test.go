package embedded

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/stretchr/testify/require"
)

// testdata/queue.golden.json holds the Go string literal the queue's
// schema was before it moved to migrations/*.sql: the files' SQL is that
// literal byte for byte, and runs as the very same statements.
func TestMigrationFilesAreTheOldLiteral(t *testing.T) {
	b, err := os.ReadFile("testdata/queue.golden.json")
	require.NoError(t, err)
	var old []string
	require.NoError(t, json.Unmarshal(b, &old))
	var sqls []string
	for i, m := range migrations {
		require.Equal(t, i+1, m.Version, m.File)
		sqls = append(sqls, m.SQL)
	}
	require.Equal(t, old, sqls)
	for _, d := range []dialect.SQL{dialect.SQLite, dialect.Postgres} {
		// What the earlier create executed, statement by statement.
		ran := strings.Split(strings.NewReplacer("{{SERIAL}}", d.Serial, "{{BLOB}}", d.Blob).Replace(old[0]), ";")
		require.Equal(t, ran, ddl.Statements(d, migrations[0].SQL), d.Name)
	}
}
