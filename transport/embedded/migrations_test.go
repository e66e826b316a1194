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
	// 001 is that literal but for its index by visible_at, which 002
	// replaced (creating it on every open only for 002 to drop it would
	// rebuild it each time).
	const readyIndex = ";\nCREATE INDEX IF NOT EXISTS seqbox_queue_ready ON seqbox_queue (queue, visible_at, seq)"
	require.Contains(t, old[0], readyIndex)
	old[0] = strings.Replace(old[0], readyIndex, "", 1)
	require.Greater(t, len(sqls), len(old))
	require.Equal(t, old, sqls[:len(old)], "the files that replaced the literal; later ones are new")
	for _, d := range []dialect.SQL{dialect.SQLite, dialect.Postgres} {
		// What the earlier create executed, statement by statement.
		ran := strings.Split(strings.NewReplacer("{{SERIAL}}", d.Serial, "{{BLOB}}", d.Blob).Replace(old[0]), ";")
		require.Equal(t, ran, ddl.Statements(d, migrations[0].SQL), d.Name)
	}
}
