package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// A schema_version that is no version number (edited by hand, or
// corrupt) is an error that names it, for every access mode, never a
// panic.
func TestOpenRefusesABadSchemaVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	for _, v := range []string{"-1", "x", ""} {
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		_, err = db.Exec(`UPDATE seqbox_meta SET value = $1 WHERE name = 'schema_version'`, v)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		for _, access := range []store.Access{store.Adopt, store.ReadOnly} {
			_, err := sqlite.OpenWith(ctx, path, sqlite.Options{Access: access})
			require.ErrorContains(t, err, "schema_version", "value %q, %s", v, access)
		}
		// Exclusive refuses the database first: the library adopted it.
		_, err = sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.Exclusive})
		require.ErrorIs(t, err, store.ErrForeignDatabase)
	}
}
