package sqlitedb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
// then keeps every page a run wrote (WALPages). The pools opened while it
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

// WALPages returns the page number of each frame of the WAL of the
// database at path (a file path or a "file:" URI, as Open takes it), in
// the WAL's order: the frames written since the WAL last started over (a
// frame left from before carries the old salts and ends the list). A
// database without a WAL file has none; one in memory has no file.
func WALPages(path string) ([]uint32, error) {
	t, err := Locate(path)
	if err != nil {
		return nil, err
	}
	if t.Path == "" {
		return nil, fmt.Errorf("sqlite: %s is in memory: it has no WAL file", t.Where)
	}
	b, err := os.ReadFile(t.Path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read the WAL: %w", err)
	}
	return walFrames(b)
}

// walFrames parses a WAL file's bytes into its frames' page numbers. It
// checks the header's magic number and page size, and stops at the first
// frame whose salts are not the header's or that the file cuts short; it
// does not verify checksums (the WAL of a live database is read as it is
// being written, and a frame that has not committed yet counts as
// written).
func walFrames(b []byte) ([]uint32, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < walHeaderSize {
		return nil, fmt.Errorf("sqlite: WAL of %d bytes, shorter than its %d-byte header", len(b), walHeaderSize)
	}
	if magic := binary.BigEndian.Uint32(b); magic != 0x377f0682 && magic != 0x377f0683 {
		return nil, fmt.Errorf("sqlite: WAL magic number %#x: not a WAL file", magic)
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:]))
	if pageSize == 1 {
		pageSize = 65536 // the format's encoding of 64 KiB
	}
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return nil, fmt.Errorf("sqlite: WAL page size %d: not a power of two from 512 to 65536", pageSize)
	}
	salt1, salt2 := binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])
	var pages []uint32
	for off := walHeaderSize; off+walFrameHeaderSize+pageSize <= len(b); off += walFrameHeaderSize + pageSize {
		f := b[off:]
		if binary.BigEndian.Uint32(f[8:]) != salt1 || binary.BigEndian.Uint32(f[12:]) != salt2 {
			break
		}
		pages = append(pages, binary.BigEndian.Uint32(f))
	}
	return pages, nil
}

// PageTrees maps each page of the database at path (as WALPages takes
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
