package sqlitedb

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// While checkpoints are held, a pool opened then keeps every page its
// commits wrote in the WAL: WALPages lists them, and PageTrees names the
// table or index of each. An index on random keys takes a page per row
// once it is larger than a commit's rows; the table itself, appended to
// in rowid order, takes about one a commit.
func TestHeldCheckpointsKeepEveryPageInTheWAL(t *testing.T) {
	ctx := context.Background()
	release, ok := HoldCheckpoints()
	require.True(t, ok)
	_, again := HoldCheckpoints()
	require.False(t, again, "a second hold while one holds")
	held := filepath.Join(t.TempDir(), "held.db")
	db, err := Open(ctx, held)
	release()
	require.NoError(t, err)
	defer db.Close()
	// Opened after the hold ended: SQLite checkpoints it every thousand
	// pages, and its WAL starts over.
	free := filepath.Join(t.TempDir(), "free.db")
	other, err := Open(ctx, free)
	require.NoError(t, err)
	defer other.Close()
	fill := strings.Repeat("x", 200)
	for _, db := range []*sql.DB{db, other} {
		_, err = db.Exec(`CREATE TABLE t (k TEXT NOT NULL, v TEXT NOT NULL); CREATE UNIQUE INDEX t_k ON t (k)`)
		require.NoError(t, err)
		// 8,000 rows of random keys, one commit each hundred: thousands
		// of pages of WAL.
		for c := range 80 {
			tx, err := db.Begin()
			require.NoError(t, err)
			for i := range 100 {
				_, err := tx.Exec(`INSERT INTO t (k, v) VALUES (?, ?)`, fmt.Sprintf("%08x", uint32((c*100+i)*2654435761)), fill)
				require.NoError(t, err)
			}
			require.NoError(t, tx.Commit())
		}
	}
	before, err := WALPages(held)
	require.NoError(t, err)
	require.Greater(t, len(before), 2000, "the held pool's WAL kept every frame")
	freed, err := WALPages(free)
	require.NoError(t, err)
	require.Less(t, len(freed), 1500, "the other pool's WAL started over after a checkpoint")

	tx, err := db.Begin()
	require.NoError(t, err)
	for i := range 100 {
		_, err := tx.Exec(`INSERT INTO t (k, v) VALUES (?, ?)`, fmt.Sprintf("z%08d", i), fill)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	after, err := WALPages(held)
	require.NoError(t, err)
	trees, err := PageTrees(ctx, held)
	require.NoError(t, err)
	by := map[string]int{}
	for _, pg := range after[len(before):] {
		by[trees[pg]]++
	}
	// Keys from "z", in order: appended to the index's last leaves, and
	// the table's 100 rows of 200 bytes to a handful of pages.
	require.Positive(t, by["t"], "%v", by)
	require.Positive(t, by["t_k"], "%v", by)
	require.Less(t, len(after)-len(before), 40, "%v", by)
}

// walFrames reads a WAL's frames up to the first left from before the
// WAL started over (other salts) or cut short, and refuses a file that
// is not a WAL.
func TestWALFramesStopAtOldSaltsAndRefuseOtherFiles(t *testing.T) {
	const pageSize = 512
	wal := func(salts [2]uint32, frames ...[3]uint32) []byte { // page, salt1, salt2
		b := make([]byte, walHeaderSize)
		binary.BigEndian.PutUint32(b, 0x377f0682)
		binary.BigEndian.PutUint32(b[8:], pageSize)
		binary.BigEndian.PutUint32(b[16:], salts[0])
		binary.BigEndian.PutUint32(b[20:], salts[1])
		for _, f := range frames {
			h := make([]byte, walFrameHeaderSize+pageSize)
			binary.BigEndian.PutUint32(h, f[0])
			binary.BigEndian.PutUint32(h[8:], f[1])
			binary.BigEndian.PutUint32(h[12:], f[2])
			b = append(b, h...)
		}
		return b
	}
	pages, err := walFrames(wal([2]uint32{7, 9}, [3]uint32{3, 7, 9}, [3]uint32{5, 7, 9}, [3]uint32{4, 1, 2}, [3]uint32{6, 7, 9}))
	require.NoError(t, err)
	require.Equal(t, []uint32{3, 5}, pages)
	b := wal([2]uint32{7, 9}, [3]uint32{3, 7, 9}, [3]uint32{5, 7, 9})
	pages, err = walFrames(b[:len(b)-1])
	require.NoError(t, err)
	require.Equal(t, []uint32{3}, pages, "a frame the file cuts short")
	pages, err = walFrames(nil)
	require.NoError(t, err)
	require.Empty(t, pages)

	_, err = walFrames([]byte("SQLite format 3\x00 and then some bytes"))
	require.EqualError(t, err, "sqlite: WAL magic number 0x53514c69: not a WAL file")
	_, err = walFrames([]byte("short"))
	require.EqualError(t, err, "sqlite: WAL of 5 bytes, shorter than its 32-byte header")
	odd := wal([2]uint32{1, 1})
	binary.BigEndian.PutUint32(odd[8:], 1000)
	_, err = walFrames(odd)
	require.EqualError(t, err, "sqlite: WAL page size 1000: not a power of two from 512 to 65536")
}

// walFrames never panics and lists no more frames than the bytes hold.
func FuzzWALFrames(f *testing.F) {
	h := make([]byte, walHeaderSize+walFrameHeaderSize+512)
	binary.BigEndian.PutUint32(h, 0x377f0683)
	binary.BigEndian.PutUint32(h[8:], 512)
	f.Add(h)
	f.Add([]byte{})
	f.Add(h[:walHeaderSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		pages, err := walFrames(b)
		if err != nil {
			require.Empty(t, pages)
			return
		}
		require.LessOrEqual(t, len(pages)*(walFrameHeaderSize+512), len(b))
	})
}
