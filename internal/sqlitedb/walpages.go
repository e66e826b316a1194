package sqlitedb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"

	"github.com/seqbox/seqbox/store"
)

// checkpointsHeld is set while HoldCheckpoints holds: writer pools opened
// then leave the WAL to grow.
var checkpointsHeld atomic.Bool

// HoldCheckpoints makes the writer pools opened from now on leave their
// WAL to grow (wal_autocheckpoint 0) instead of copying it into the
// database every thousand pages, for `seqbox bench agent --pages`: the WAL
// then keeps every page a run wrote (ReadWAL). The pools opened while it
// held keep the setting for their life; release ends the hold for pools
// opened later. One hold at a time: a second HoldCheckpoints while one
// holds returns ok false.
func HoldCheckpoints() (release func(), ok bool) {
	if !checkpointsHeld.CompareAndSwap(false, true) {
		return nil, false
	}
	return func() { checkpointsHeld.Store(false) }, true
}

// walHeaderSize and walFrameHeaderSize are the sizes of a WAL file's
// header and of each frame's header (https://sqlite.org/fileformat.html,
// "The WAL File Format").
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
)

// WAL is what ReadWAL read of a WAL file: the salts of its header, which
// change when the WAL starts over, its frames' count, and, from the
// frame asked for on, each frame's page number and how many of them end
// a commit.
type WAL struct {
	Salts   [2]uint32
	Frames  int
	Pages   []uint32
	Commits int
}

// ReadWAL reads the WAL of the database at path (a file path or a "file:"
// URI, as Open takes it): the frames written since it last started over
// (a frame left from before carries the old salts and ends them), with
// the page numbers and commits of those from index from on. It reads the
// frames' headers only. A database without a WAL file has none; one in
// memory has no file.
func ReadWAL(path string, from int) (WAL, error) {
	t, err := Locate(path)
	if err != nil {
		return WAL{}, err
	}
	if t.Path == "" {
		return WAL{}, fmt.Errorf("sqlite: %s is in memory: it has no WAL file", t.Where)
	}
	f, err := os.Open(t.Path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return WAL{}, nil
	}
	if err != nil {
		return WAL{}, fmt.Errorf("sqlite: read the WAL: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return WAL{}, fmt.Errorf("sqlite: read the WAL: %w", err)
	}
	return readWAL(f, st.Size(), from)
}

// readWAL reads a WAL file of size bytes through r (ReadWAL). It checks
// the header's magic number and page size, and stops at the first frame
// whose salts are not the header's or that the file cuts short; it does
// not verify checksums (the WAL of a live database is read as it is being
// written, and a frame whose commit has not ended yet counts as written).
func readWAL(r io.ReaderAt, size int64, from int) (WAL, error) {
	var w WAL
	if size == 0 {
		return w, nil
	}
	h := make([]byte, walHeaderSize)
	if size < walHeaderSize {
		return w, fmt.Errorf("sqlite: WAL of %d bytes, shorter than its %d-byte header", size, walHeaderSize)
	}
	if _, err := r.ReadAt(h, 0); err != nil {
		return w, fmt.Errorf("sqlite: read the WAL: %w", err)
	}
	if magic := binary.BigEndian.Uint32(h); magic != 0x377f0682 && magic != 0x377f0683 {
		return w, fmt.Errorf("sqlite: WAL magic number %#x: not a WAL file", magic)
	}
	pageSize := int64(binary.BigEndian.Uint32(h[8:]))
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return w, fmt.Errorf("sqlite: WAL page size %d: not a power of two from 512 to 65536", pageSize)
	}
	w.Salts = [2]uint32{binary.BigEndian.Uint32(h[16:]), binary.BigEndian.Uint32(h[20:])}
	fh := make([]byte, walFrameHeaderSize)
	for off := int64(walHeaderSize); off+walFrameHeaderSize+pageSize <= size; off += walFrameHeaderSize + pageSize {
		if _, err := r.ReadAt(fh, off); err != nil {
			return w, fmt.Errorf("sqlite: read the WAL: %w", err)
		}
		if binary.BigEndian.Uint32(fh[8:]) != w.Salts[0] || binary.BigEndian.Uint32(fh[12:]) != w.Salts[1] {
			break
		}
		if w.Frames >= from {
			w.Pages = append(w.Pages, binary.BigEndian.Uint32(fh))
			if binary.BigEndian.Uint32(fh[4:]) != 0 {
				w.Commits++ // the database's size after the commit: its last frame
			}
		}
		w.Frames++
	}
	return w, nil
}

// PageTrees maps each page of the database at path (as ReadWAL takes
// it) in use by a table or an index to that table's or index's name, from
// SQLite's dbstat table (a page not listed is free).
func PageTrees(ctx context.Context, path string) (map[uint32]string, error) {
	db, err := OpenAccess(ctx, path, store.ReadOnly)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT pageno, name FROM dbstat`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: dbstat: %w", err)
	}
	defer rows.Close()
	out := map[uint32]string{}
	for rows.Next() {
		var page uint32
		var name string
		if err := rows.Scan(&page, &name); err != nil {
			return nil, fmt.Errorf("sqlite: dbstat: %w", err)
		}
		out[page] = name
	}
	return out, rows.Err()
}
