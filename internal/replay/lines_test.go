package replay

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// endless is an input that never ends and holds no newline (/dev/zero):
// it cancels the replay's context after cancelAfter reads, as a Ctrl-C
// would, and fails a read far past that instead of going on for good.
type endless struct {
	reads, cancelAfter int
	cancel             context.CancelFunc
}

var errReadPastCancel = errors.New("read on long after the context ended")

func (e *endless) Read(p []byte) (int, error) {
	e.reads++
	if e.reads == e.cancelAfter {
		e.cancel()
	}
	if e.reads > e.cancelAfter+10 {
		return 0, errReadPastCancel
	}
	clear(p)
	return len(p), nil
}

// A line that never ends stops being read once the context ends: `seqbox
// replay /dev/zero` went on through SIGINT and SIGTERM, skipping one
// endless oversized line, and only SIGKILL stopped it.
func TestAnEndlessLineStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &endless{cancelAfter: 100, cancel: cancel}
	_, err := newLineReader(ctx, in, maxLine).next()
	require.ErrorIs(t, err, context.Canceled)
	require.LessOrEqual(t, in.reads, in.cancelAfter+1, "no read after the context ended")
}
