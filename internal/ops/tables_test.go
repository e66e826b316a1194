package ops

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingWriter counts the writes that reach it, as write(2) calls would
// on a terminal or a pipe.
type countingWriter struct {
	writes int
	text   strings.Builder
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.text.Write(p)
}

// A text table reaches its writer in a few large writes, not one per cell
// or byte of padding: written straight to an unbuffered os.Stdout, a
// million-key `keys list --all` spent 104 s in write(2), one byte at a
// time.
func TestATableReachesItsWriterInFewWrites(t *testing.T) {
	reps := make([]KeyReport, 2000)
	for i := range reps {
		reps[i] = KeyReport{PartitionKey: fmt.Sprintf("key-%d", i), Status: StatusOK}
	}
	var w countingWriter
	require.NoError(t, WriteKeys(&w, reps, Text))
	require.Equal(t, len(reps)+1, strings.Count(w.text.String(), "\n"), "every key and the header print")
	require.True(t, strings.Contains(w.text.String(), "\nkey-1999 "), "the last key prints")
	require.Less(t, w.writes, 20, "the table's bytes went out in %d writes", w.writes)

	var f countingWriter
	require.NoError(t, WriteKey(&f, KeyDetail{KeyReport: reps[0]}))
	require.Less(t, f.writes, 5, "one key's fields went out in %d writes", f.writes)
}
