package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// postBodies keeps every event, in order: alone as structured
// CloudEvents at a batch of 1 (or 0), else in JSON arrays of at most
// batch events sent in CloudEvents batch mode.
func TestPostBodiesKeepEveryEventInOrder(t *testing.T) {
	events := make([][]byte, 5)
	for i := range events {
		events[i] = agentBody("r", "e", i, 1)
	}
	for _, batch := range []int{0, 1} {
		posts := postBodies(events, batch)
		require.Len(t, posts, 5)
		for i, p := range posts {
			require.Equal(t, "application/cloudevents+json", p.contentType)
			require.Equal(t, events[i], p.body)
		}
	}
	posts := postBodies(events, 2)
	require.Len(t, posts, 3)
	var got []json.RawMessage
	for _, p := range posts {
		require.Equal(t, "application/cloudevents-batch+json", p.contentType)
		var arr []json.RawMessage
		require.NoError(t, json.Unmarshal(p.body, &arr), string(p.body))
		require.LessOrEqual(t, len(arr), 2)
		got = append(got, arr...)
	}
	require.Len(t, got, 5)
	for i := range events {
		require.JSONEq(t, string(events[i]), string(got[i]))
	}
}
