package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// Issue 36: a key whose committed objectversion is math.MaxInt64 showed
// EXPECTED as -9223372036854775808 (version+1 overflowed). No version can
// follow it, so there is no expected version: the table shows none, and
// JSON says null.
func TestKeyAtMaxVersionExpectsNone(t *testing.T) {
	op := fakeExecutor{views: []store.KeyView{
		{KeyState: store.KeyState{Key: "M", Version: ptr(math.MaxInt64)}},
		{KeyState: store.KeyState{Key: "N", Version: ptr(math.MaxInt64 - 1)}},
	}}
	reps, err := Reporter{Op: op, Consumer: "c", FirstVersion: ptr(1)}.Keys(context.Background(), true)
	require.NoError(t, err)
	require.Nil(t, reps[0].Expected, "nothing follows version %d", int64(math.MaxInt64))
	require.Equal(t, ptr(math.MaxInt64), reps[1].Expected)

	var b bytes.Buffer
	require.NoError(t, WriteKeys(&b, reps, Text))
	require.NotContains(t, b.String(), "-9223372036854775808")
	lines := strings.Split(b.String(), "\n")
	require.Equal(t, []string{"M", "ok", "9223372036854775807", "-", "-"}, strings.Fields(lines[1])[:5])

	b.Reset()
	require.NoError(t, WriteKeys(&b, reps[:1], JSONLines))
	var line map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &line))
	require.Contains(t, line, "expected")
	require.Nil(t, line["expected"])
}
