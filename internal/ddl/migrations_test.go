package ddl

import (
	"testing"
	"testing/fstest"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/stretchr/testify/require"
)

func files(names ...string) fstest.MapFS {
	fs := fstest.MapFS{}
	for _, n := range names {
		fs["m/"+n] = &fstest.MapFile{Data: []byte("-- about " + n + "\n--\nCREATE TABLE t_" + n[:3] + " (x INT);\n\tSELECT 1\n")}
	}
	return fs
}

func TestLoadInVersionOrder(t *testing.T) {
	ms, err := Load(files("010_j.sql", "002_b.sql", "1_a.sql", "003_c.sql", "004_d.sql", "005_e.sql",
		"006_f.sql", "007_g.sql", "008_h.sql", "009_i.sql"), "m")
	require.NoError(t, err)
	require.Len(t, ms, 10)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version, m.File)
	}
	require.Equal(t, "1_a.sql", ms[0].File)
	require.Equal(t, "010_j.sql", ms[9].File)
	// The comment lines and the final newline are not part of the SQL.
	require.Equal(t, "CREATE TABLE t_1_a (x INT);\n\tSELECT 1", ms[0].SQL)
}

func TestLoadRefusesBadSets(t *testing.T) {
	for want, fs := range map[string]fstest.MapFS{
		"a version is missing": files("001_a.sql", "003_c.sql"),
		"both have version 2":  files("001_a.sql", "002_b.sql", "02_b2.sql"),
		"is not a migration":   files("001_a.sql", "002_b.txt"),
		"not a migration":      files("001_a.sql", "a_b.sql"),
		"not a migration (NNN": files("000_a.sql"),
		"has no SQL": {
			"m/001_a.sql": &fstest.MapFile{Data: []byte("-- nothing\n")},
		},
	} {
		_, err := Load(fs, "m")
		require.ErrorContains(t, err, want)
	}
	_, err := Load(files(), "nowhere")
	require.Error(t, err)
	require.Panics(t, func() { MustLoad(files("002_b.sql"), "m") })
}

func TestStatements(t *testing.T) {
	const text = "CREATE TABLE a (seq {{SERIAL}}, b {{BLOB}});\n\tCREATE INDEX i ON a (b);\n"
	require.Equal(t, []string{"CREATE TABLE a (seq BIGSERIAL PRIMARY KEY, b BYTEA)", "\n\tCREATE INDEX i ON a (b)"},
		Statements(dialect.Postgres, text))
	require.Equal(t, []string{"CREATE TABLE a (seq INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB)", "\n\tCREATE INDEX i ON a (b)"},
		Statements(dialect.SQLite, text))
}
