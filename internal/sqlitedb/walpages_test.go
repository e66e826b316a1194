package sqlitedb

import (
	"bytes"
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
	before, err := ReadWAL(held, 0)
	require.NoError(t, err)
	require.Greater(t, before.Frames, 2000, "the held pool's WAL kept every frame")
	require.Equal(t, 80+2, before.Commits, "the table and index created, and 80 commits of rows")
	freed, err := ReadWAL(free, 0)
	require.NoError(t, err)
	require.Less(t, freed.Frames, 1500, "the other pool's WAL started over after a checkpoint")

	tx, err := db.Begin()
	require.NoError(t, err)
	for i := range 100 {
		_, err := tx.Exec(`INSERT INTO t (k, v) VALUES (?, ?)`, fmt.Sprintf("z%08d", i), fill)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	after, err := ReadWAL("file:"+held, before.Frames)
	require.NoError(t, err)
	require.Equal(t, before.Salts, after.Salts)
	require.Equal(t, 1, after.Commits)
	require.Len(t, after.Pages, after.Frames-before.Frames)
	trees, err := PageTrees(ctx, held)
	require.NoError(t, err)
	by := map[string]int{}
	for _, pg := range after.Pages {
		by[trees[pg]]++
	}
	// Keys from "z", in order: appended to the index's last leaves, and
	// the table's 100 rows of 200 bytes to a handful of pages.
	require.Positive(t, by["t"], "%v", by)
	require.Positive(t, by["t_k"], "%v", by)
	require.Less(t, len(after.Pages), 40, "%v", by)
}

// readWAL reads a WAL's frames up to the first left from before the
// WAL started over (either salt another) or cut short, counts the frames
// that end a commit, lists the pages from the frame asked for on, and
// refuses a file that is not a WAL.
func TestReadWALStopsAtOldSaltsAndRefusesOtherFiles(t *testing.T) {
	const pageSize = 512
	type frame struct{ page, commit, salt1, salt2 uint32 }
	wal := func(magic uint32, salts [2]uint32, frames ...frame) []byte {
		b := make([]byte, walHeaderSize)
		binary.BigEndian.PutUint32(b, magic)
		binary.BigEndian.PutUint32(b[8:], pageSize)
		binary.BigEndian.PutUint32(b[16:], salts[0])
		binary.BigEndian.PutUint32(b[20:], salts[1])
		for _, f := range frames {
			h := make([]byte, walFrameHeaderSize+pageSize)
			binary.BigEndian.PutUint32(h, f.page)
			binary.BigEndian.PutUint32(h[4:], f.commit)
			binary.BigEndian.PutUint32(h[8:], f.salt1)
			binary.BigEndian.PutUint32(h[12:], f.salt2)
			b = append(b, h...)
		}
		return b
	}
	read := func(b []byte, from int) (WAL, error) { return readWAL(bytes.NewReader(b), int64(len(b)), from) }
	for _, magic := range []uint32{0x377f0682, 0x377f0683} {
		for _, stale := range []frame{{4, 0, 1, 9}, {4, 0, 7, 1}, {4, 0, 1, 2}} {
			w, err := read(wal(magic, [2]uint32{7, 9}, frame{3, 0, 7, 9}, frame{5, 12, 7, 9}, stale, frame{6, 13, 7, 9}), 0)
			require.NoError(t, err)
			require.Equal(t, WAL{Salts: [2]uint32{7, 9}, Frames: 2, Pages: []uint32{3, 5}, Commits: 1}, w, "stale frame %v", stale)
		}
	}
	b := wal(0x377f0682, [2]uint32{7, 9}, frame{3, 0, 7, 9}, frame{5, 12, 7, 9}, frame{8, 14, 7, 9})
	w, err := read(b, 1)
	require.NoError(t, err)
	require.Equal(t, WAL{Salts: [2]uint32{7, 9}, Frames: 3, Pages: []uint32{5, 8}, Commits: 2}, w, "from the second frame on")
	w, err = read(b[:len(b)-1], 0)
	require.NoError(t, err)
	require.Equal(t, []uint32{3, 5}, w.Pages, "a frame the file cuts short")
	w, err = read(nil, 0)
	require.NoError(t, err)
	require.Empty(t, w.Pages)

	_, err = read([]byte("SQLite format 3\x00 and then some bytes"), 0)
	require.EqualError(t, err, "sqlite: WAL magic number 0x53514c69: not a WAL file")
	_, err = read([]byte("short"), 0)
	require.EqualError(t, err, "sqlite: WAL of 5 bytes, shorter than its 32-byte header")
	for _, size := range []uint32{1, 1000, 131072} {
		odd := wal(0x377f0682, [2]uint32{1, 1})
		binary.BigEndian.PutUint32(odd[8:], size)
		_, err = read(odd, 0)
		require.EqualError(t, err, fmt.Sprintf("sqlite: WAL page size %d: not a power of two from 512 to 65536", size))
	}
	_, err = ReadWAL("file::memory:", 0)
	require.EqualError(t, err, "sqlite: file::memory: is in memory: it has no WAL file")
}

// readWAL never panics and lists no more frames than the bytes hold.
func FuzzReadWAL(f *testing.F) {
	h := make([]byte, walHeaderSize+walFrameHeaderSize+512)
	binary.BigEndian.PutUint32(h, 0x377f0683)
	binary.BigEndian.PutUint32(h[8:], 512)
	f.Add(h, 0)
	f.Add([]byte{}, 0)
	f.Add(h[:walHeaderSize], 1)
	f.Fuzz(func(t *testing.T, b []byte, from int) {
		w, err := readWAL(bytes.NewReader(b), int64(len(b)), from)
		if err != nil {
			require.Empty(t, w.Pages)
			return
		}
		require.LessOrEqual(t, w.Frames*(walFrameHeaderSize+512), len(b))
		require.LessOrEqual(t, len(w.Pages), w.Frames)
		require.LessOrEqual(t, w.Commits, len(w.Pages))
	})
}
