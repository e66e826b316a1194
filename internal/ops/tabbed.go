package ops

import (
	"bufio"
	"io"
	"text/tabwriter"
)

// Tabbed is a tabwriter.Writer whose output is buffered: a tabwriter
// writes every cell, and every run of padding, as a write of its own, so
// a table written straight to os.Stdout made one write(2) per cell and
// per padding byte (a million-key `keys list --all` spent 104 s in them).
// Flush ends the table and writes it out.
type Tabbed struct {
	*tabwriter.Writer
	buf *bufio.Writer
}

// NewTabbed returns a Tabbed on w with tabwriter.NewWriter's layout
// arguments, padded with spaces.
func NewTabbed(w io.Writer, minwidth, tabwidth, padding int) *Tabbed {
	buf := bufio.NewWriterSize(w, 64<<10)
	return &Tabbed{Writer: tabwriter.NewWriter(buf, minwidth, tabwidth, padding, ' ', 0), buf: buf}
}

// Flush aligns what was written and sends it to the underlying writer.
func (t *Tabbed) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	return t.buf.Flush()
}
