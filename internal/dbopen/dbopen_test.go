package dbopen_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

func TestUnsupportedSchemes(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, c := range []struct{ db, want string }{
		{"mysql://x", `--db mysql://x: unsupported scheme "mysql": seqbox stores are a SQLite file path or a postgres:// URL`},
		{"sqlite://x", `--db sqlite://x: unsupported scheme "sqlite": seqbox stores are a SQLite file path or a postgres:// URL`},
		{"sqlite:///tmp/x.db", `--db sqlite:///tmp/x.db: unsupported scheme "sqlite": seqbox stores are a SQLite file path or a postgres:// URL`},
	} {
		for _, access := range []store.Access{store.Adopt, store.Exclusive, store.ReadOnly} {
			_, err := dbopen.StoreAccess(context.Background(), c.db, access)
			require.EqualError(t, err, c.want)
		}
		_, err := dbopen.Store(context.Background(), c.db)
		require.EqualError(t, err, c.want)
	}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is created")
}

// A --db path is a file name, whatever characters it holds.
func TestPathsAreFileNames(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"app.db#", "app%2Edb", "a?b.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := dbopen.Store(ctx, filepath.Join(dir, name))
			require.NoError(t, err)
			require.NoError(t, st.Close())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1)
			require.Equal(t, name, entries[0].Name(), "exactly that file, and no app.db")

			st, err = dbopen.StoreAccess(ctx, filepath.Join(dir, name), store.ReadOnly)
			require.NoError(t, err)
			require.NoError(t, st.Close())
		})
	}
}

func TestFileURI(t *testing.T) {
	dir := t.TempDir()
	st, err := dbopen.Store(context.Background(), "file:"+dir+"/x%3Fy.db")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = os.Stat(filepath.Join(dir, "x?y.db"))
	require.NoError(t, err)
}

// The old function is an exclusive open: an application's file is refused.
func TestStoreIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	st, err := dbopen.StoreAccess(context.Background(), path, store.Adopt)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = dbopen.Store(context.Background(), path)
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestReadOnlyMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo.db")
	_, err := dbopen.StoreAccess(context.Background(), missing, store.ReadOnly)
	require.EqualError(t, err, "--db "+missing+": no such file or directory")
	_, err = os.Stat(missing)
	require.True(t, os.IsNotExist(err), "a read-only open creates nothing")
}
