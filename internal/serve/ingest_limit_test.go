package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// An event of exactly the one-event limit (seqboxtype.MaxEventSize) is
// taken and applied; one byte more is refused with 413 naming the
// envelope, and nothing of it is queued. (The bound was tested only far
// above it: refusing the limit itself went through every test.)
func TestIngestTakesAnEventOfExactlyItsLimit(t *testing.T) {
	r := start(t, Options{})
	sized := func(id string, n int) string {
		e := ev(id, "", 0, `""`)
		return ev(id, "", 0, `"`+strings.Repeat("x", n-len(e))+`"`)
	}
	atLimit := sized("at-limit", seqboxtype.MaxEventSize)
	require.Len(t, atLimit, seqboxtype.MaxEventSize)
	r.postWant(t, atLimit, http.StatusAccepted)
	eventually(t, "the event at the limit applied", func() bool { return r.effects(t) == 1 })

	over := sized("over", seqboxtype.MaxEventSize+1)
	body := r.postWant(t, over, http.StatusRequestEntityTooLarge)
	require.Equal(t, ProblemTooLarge, body["type"])
	require.Equal(t, "envelope", body["field"])
	require.Contains(t, body["detail"], "1048577 bytes, larger than the 1048576-byte limit of one event")
	require.Equal(t, "duplicate", r.postWant(t, atLimit, http.StatusOK)["status"], "the one taken is known; the refused one was never queued")
	r.postWant(t, sized("over", 100), http.StatusAccepted) // its id is free: nothing of the refused one was kept
	eventually(t, "two applied", func() bool { return r.effects(t) == 2 })
}
