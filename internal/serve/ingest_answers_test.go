package serve

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Ingest says what happened to each event: a new one is 202 queued, a
// copy posted again 200 duplicate with the first copy's time, another
// payload under the same identity 409 naming it; a batch answers per
// event, a copy within the same batch included. Only new events are
// queued: the consumer applies each once and meets no copy.
func TestIngestAnswersPerEvent(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			first := r.postWant(t, ev("a", "K", 1, `{"n":1}`), http.StatusAccepted)
			require.Equal(t, []any{"queued", 1.0, 0.0, 0.0}, []any{first["status"], first["accepted"], first["duplicates"], first["collisions"]})
			dup := r.postWant(t, ev("a", "K", 1, `{"n":1}`), http.StatusOK)
			require.Equal(t, "duplicate", dup["status"])
			e := list(t, dup, "events")[0]
			require.Equal(t, []any{"crm", "a", "duplicate"}, []any{e["source"], e["id"], e["status"]})
			at, err := time.Parse(time.RFC3339Nano, e["first_accepted_at"].(string))
			require.NoError(t, err, "the first copy's time")
			require.WithinDuration(t, time.Now(), at, time.Hour)

			p := r.postWant(t, ev("a", "K", 1, `{"n":2}`), http.StatusConflict)
			require.Equal(t, []any{ProblemCollision, "crm", "a", "id"}, []any{p["type"], p["source"], p["id"], p["field"]})
			require.Contains(t, p["detail"], `source="crm" id="a" was accepted at `+e["first_accepted_at"].(string)+" with another payload")

			batch := "[" + ev("a", "K", 1, `{"n":1}`) + "," + ev("b", "K", 2, "") + "," + ev("b", "K", 2, "") + "," +
				ev("a", "K", 1, `{"n":3}`) + "]"
			code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
			require.Equal(t, http.StatusAccepted, code, "%v", body)
			require.Equal(t, []any{"partial", 1.0, 2.0, 1.0}, []any{body["status"], body["accepted"], body["duplicates"], body["collisions"]})
			var statuses []any
			for _, e := range list(t, body, "events") {
				statuses = append(statuses, e["status"])
			}
			require.Equal(t, []any{"duplicate", "queued", "duplicate", "collision"}, statuses, "per event, a copy in the same batch too")

			code, body, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, "["+ev("a", "K", 1, `{"n":4}`)+"]")
			require.Equal(t, http.StatusConflict, code, "a batch of collisions only: %v", body)
			require.Equal(t, "partial", body["status"])

			eventually(t, "a and b applied", func() bool { return r.effects(t) == 2 })
			ov := r.admin(t, "GET", "/v1/admin/overview", "", 200)["outcomes"].(map[string]any)
			require.EqualValues(t, 3, ov["duplicate"], "counted at ingest")
			require.EqualValues(t, 3, ov["collision"], "counted at ingest")
			cs := list(t, r.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions")
			require.Len(t, cs, 3, "each colliding payload parked once, for the diff")
			require.Contains(t, cs[0]["first"].(map[string]any)["text"], `{"n":1}`)
		})
	}
}

// Copies of one new event posted at once: the unique key decides, and
// exactly one request is told queued.
func TestIngestConcurrentCopiesQueueOnce(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			const n = 8
			codes := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					codes[i], _, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured}, ev("race", "R", 1, ""))
				})
			}
			wg.Wait()
			count := map[int]int{}
			for _, c := range codes {
				count[c]++
			}
			require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusOK: n - 1}, count)
			eventually(t, "applied", func() bool { return r.effects(t) == 1 })
		})
	}
}
