package replay

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
)

// line is one input line: its bytes, or for a line over the limit its
// first limit bytes with its full size and hash.
type line struct {
	bytes     []byte
	size      int64
	oversized bool
	sum       [32]byte
}

// lineReader reads newline-terminated lines of any length in bounded
// memory: a line longer than limit keeps only its first limit bytes, and
// the rest is hashed and counted as it streams past.
type lineReader struct {
	r     *bufio.Reader
	limit int
}

// newLineReader reads r's lines until ctx ends. A UTF-8 byte order mark
// at the very start (editors on Windows write one) is skipped: it is not
// part of the first line's JSON (RFC 8259 §8.1).
func newLineReader(ctx context.Context, r io.Reader, limit int) *lineReader {
	br := bufio.NewReaderSize(ctxReader{ctx: ctx, r: r}, 64*1024)
	if bom, err := br.Peek(3); err == nil && string(bom) == "\ufeff" {
		_, _ = br.Discard(3)
	}
	return &lineReader{r: br, limit: limit}
}

// ctxReader reads r until ctx ends, then fails with ctx's error: an input
// that never ends or never holds a newline (a device, a pipe that keeps
// writing) is skipped through as one oversized line, which without it
// went on through Ctrl-C and SIGTERM.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// next returns the next line without its "\n", or io.EOF after the last.
func (lr *lineReader) next() (line, error) {
	var l line
	var h hash.Hash
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			chunk = chunk[:len(chunk)-1]
		}
		l.size += int64(len(chunk))
		switch {
		case h != nil:
			h.Write(chunk)
		case len(l.bytes)+len(chunk) > lr.limit:
			h = sha256.New()
			h.Write(l.bytes)
			h.Write(chunk)
			l.oversized = true
			keep := lr.limit - len(l.bytes)
			l.bytes = append(l.bytes, chunk[:keep]...)
		default:
			l.bytes = append(l.bytes, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && l.size == 0 && len(chunk) == 0:
			return l, io.EOF
		case err != nil && err != io.EOF:
			return l, err
		}
		if h != nil {
			copy(l.sum[:], h.Sum(nil))
		}
		return l, nil
	}
}

// blank reports whether b holds only JSON whitespace (space, tab, CR,
// LF). Other spaces, such as NBSP or a vertical tab, are content: such a
// line is rejected, not skipped.
func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}
