package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/stretchr/testify/require"
)

// A client built on the official CloudEvents Go SDK sends structured and
// binary events (with the partitionkey, objectversion and businesskey
// extensions) to a running gateway: each gets 202 and is applied; an
// invalid one is refused with 400.
func TestServeCloudEventsSDKInterop(t *testing.T) {
	s := startServe(t, nil, "--db", filepath.Join(t.TempDir(), "seqbox.db"), "--admin-token", serveToken)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := cloudevents.NewClientHTTP(cehttp.WithTarget(s.url+"/v1/events"), cehttp.WithRoundTripper(tr))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	send := func(ctx context.Context, id string, version int) int {
		e := cloudevents.NewEvent()
		e.SetID(id)
		// A retry sends the same fact: the SDK would stamp a new time on
		// each new event, and the time is part of the payload.
		e.SetTime(time.Date(2026, 1, 2, 3, 4, version, 0, time.UTC))
		e.SetSource("crm")
		e.SetType("order.updated")
		e.SetExtension("partitionkey", "SDK-1")
		e.SetExtension("objectversion", version)
		e.SetExtension("businesskey", "note:"+id)
		require.NoError(t, e.SetData(cloudevents.ApplicationJSON, map[string]any{"version": version}))
		res := client.Send(ctx, e)
		var hr *cehttp.Result
		require.True(t, cloudevents.ResultAs(res, &hr), "result %v", res)
		return hr.StatusCode
	}
	require.Equal(t, http.StatusAccepted, send(cloudevents.WithEncodingStructured(ctx), "sdk-1", 1))
	require.Equal(t, http.StatusAccepted, send(cloudevents.WithEncodingBinary(ctx), "sdk-2", 2))
	require.Equal(t, http.StatusOK, send(cloudevents.WithEncodingBinary(ctx), "sdk-2", 2), "a retry is answered as a duplicate, not queued again")
	for _, id := range []string{"sdk-1", "sdk-2"} {
		waitUntil(t, id+" applied", func() bool { return s.outcome(t, id) == "applied" })
	}
	key := s.admin(t, "GET", "/v1/admin/keys/SDK-1", "", 200)
	require.EqualValues(t, 2, key["version"])

	// The SDK accepts any extension value; a version that is not an
	// integer is the gateway's to refuse, naming the field.
	e := cloudevents.NewEvent()
	e.SetID("sdk-bad")
	e.SetSource("crm")
	e.SetType("order.updated")
	e.SetExtension("partitionkey", "SDK-1")
	e.SetExtension("objectversion", "not-a-number")
	res := client.Send(cloudevents.WithEncodingBinary(ctx), e)
	var hr *cehttp.Result
	require.True(t, cloudevents.ResultAs(res, &hr), "result %v", res)
	require.Equal(t, http.StatusBadRequest, hr.StatusCode)
	tr.CloseIdleConnections()
}
