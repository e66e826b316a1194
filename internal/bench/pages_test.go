package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/stretchr/testify/require"
)

// A page meter counts what was written between its begin and its count,
// nothing from before, in a WAL longer than a checkpoint would have let it
// grow; its commits are the stretch's write transactions. A WAL that
// started over meanwhile (checkpointed by something the hold did not
// reach) is an error, not a count.
func TestPageMeterCountsItsStretchOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	m, err := holdPages(path, true)
	require.NoError(t, err)
	defer m.end()
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE before_it (k TEXT PRIMARY KEY, v TEXT); CREATE TABLE during_it (k TEXT PRIMARY KEY, v TEXT)`)
	require.NoError(t, err)
	fill := strings.Repeat("x", 300)
	for c := range 150 { // past a thousand frames
		tx, err := db.Begin()
		require.NoError(t, err)
		for i := range 20 {
			_, err := tx.Exec(`INSERT INTO before_it (k, v) VALUES (?, ?)`, fmt.Sprintf("%08x", uint32((c*20+i)*2654435761)), fill)
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit())
	}
	require.NoError(t, m.begin())
	require.Greater(t, m.from, 1000)
	for i := range 3 {
		_, err := db.Exec(`INSERT INTO during_it (k, v) VALUES (?, ?)`, fmt.Sprint(i), fill)
		require.NoError(t, err)
	}
	p, err := m.count(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, p.Commits, "three writes outside a transaction")
	names := map[string]int{}
	for _, tr := range p.Trees {
		names[tr.Name] = tr.Frames
	}
	require.NotContains(t, names, "before_it", "%v", p.Trees)
	require.Positive(t, names["during_it"], "%v", p.Trees)
	require.Less(t, p.Frames, 20, "%v", p.Trees)
	require.Equal(t, []string{"agent pages: run=x units=3 frames=" + fmt.Sprint(p.Frames) + fmt.Sprintf(" frames_per_unit=%.2f commits_per_unit=1.00", float64(p.Frames)/3)},
		p.Lines("x", 0))

	// Checkpointed and started over by a connection the hold does not
	// reach, then written again, past where the stretch began: only the
	// salts tell.
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	for c := range 1000 {
		_, err := db.Exec(`INSERT INTO during_it (k, v) VALUES (?, ?)`, fmt.Sprintf("again-%08x", uint32(c*2654435761)), fill)
		require.NoError(t, err)
	}
	w, err := sqlitedb.ReadWAL(path, 0)
	require.NoError(t, err)
	require.Greater(t, w.Frames, m.from)
	_, err = m.count(ctx, 1)
	require.ErrorContains(t, err, "pages: the WAL started over during the run")
}
