package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/store"
)

// What the CLI says of a request still running after its wait: that it
// may still finish while its taker is alive; that a consumer of its name
// fails it once its taker has been silent.
func TestStillRunningSaysWhetherItsTakerIsAlive(t *testing.T) {
	taken := time.Now().Add(-time.Minute)
	r := store.OperatorRequest{Seq: 7, Consumer: "crm", TakenBy: "host:1", TakenAt: taken, AliveAt: time.Now().Add(-2 * time.Second)}
	msg := (&StillRunningError{Request: r, Wait: 30 * time.Second}).Error()
	require.Contains(t, msg, "may still finish")
	r.AliveAt = taken
	msg = (&StillRunningError{Request: r, Wait: 30 * time.Second}).Error()
	require.False(t, strings.Contains(msg, "may still finish"), msg)
	require.Contains(t, msg, "no sign of life since")
	require.Contains(t, msg, `"crm"`)
}
