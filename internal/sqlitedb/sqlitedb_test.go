package sqlitedb

import (
	"context"

	"github.com/seqbox/seqbox/store"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLocateAndDSN(t *testing.T) {
	q := url.Values{}
	q.Set("mode", "ro")
	for _, c := range []struct{ in, path, dsn string }{
		{"app.db", "app.db", "file:app.db?mode=ro"},
		{"app.db#", "app.db#", "file:app.db%23?mode=ro"},
		{"app%2Edb", "app%2Edb", "file:app%252Edb?mode=ro"},
		{"a?b.db", "a?b.db", "file:a%3Fb.db?mode=ro"},
		{"/tmp/x y/ü.db", "/tmp/x y/ü.db", "file:///tmp/x%20y/%C3%BC.db?mode=ro"},
		{"dir/a&b=c.db", "dir/a&b=c.db", "file:dir/a%26b%3Dc.db?mode=ro"},
		{"./mysql://x", "./mysql://x", "file:./mysql%3A//x?mode=ro"},
		// file: URIs pass through as written; the path is decoded for the checks.
		{"file:app.db", "app.db", "file:app.db?mode=ro"},
		{"file:app%23.db?cache=private#frag", "app#.db", "file:app%23.db?cache=private&mode=ro"},
		{"file:///tmp/x.db", "/tmp/x.db", "file:///tmp/x.db?mode=ro"},
		{"file://localhost/tmp/x.db", "/tmp/x.db", "file://localhost/tmp/x.db?mode=ro"},
		{"file::memory:", "", "file::memory:?mode=ro"},
		{"file:x.db?mode=memory", "", "file:x.db?mode=memory&mode=ro"},
	} {
		got, err := Locate(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.path, got.Path, c.in)
		require.Equal(t, c.dsn, got.DSN(q), c.in)
	}
	for in, want := range map[string]string{
		"":                   "empty",
		"mysql://x":          `unsupported scheme "mysql"`,
		"sqlite://x.db":      `unsupported scheme "sqlite"`,
		"postgres://h/db":    "PostgreSQL URL",
		"file://host/x.db":   "no host",
		"file:bad%zz.db":     "escape",
		"HTTPS://example/db": `unsupported scheme "HTTPS"`,
	} {
		_, err := Locate(in)
		require.ErrorContains(t, err, want, in)
	}
}

func TestEscapePathRoundTrips(t *testing.T) {
	for _, p := range []string{"a", "%", "%%41", "#?&=+;:@ ", "日本.db", "a\x01b"} {
		got, err := unescape(escapePath(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
}

// An in-memory database of a connection's own is refused for writing, in
// every spelling: the pools open several connections, and each saw an
// empty database of its own (`replay --db :memory:` applied its events,
// then failed on a table another connection had made). A shared one
// (cache=shared) is one database for them all, and is taken.
func TestAnInMemoryDatabaseIsRefusedForWriting(t *testing.T) {
	for _, shared := range []string{"file::memory:?cache=shared", "file:shared-mem.db?mode=memory&cache=shared"} {
		db, err := OpenAccess(context.Background(), shared, store.Adopt)
		require.NoError(t, err, shared)
		require.NoError(t, db.Close())
	}
	for _, where := range []string{":memory:", "file::memory:", "file:x.db?mode=memory"} {
		for _, access := range []store.Access{store.Exclusive, store.Adopt} {
			_, err := OpenAccess(context.Background(), where, access)
			require.ErrorContains(t, err, "is in memory: seqbox needs a database file", "%s %s", where, access)
		}
		_, err := OpenRelaxed(context.Background(), where)
		require.ErrorContains(t, err, "is in memory", where)
	}
}
