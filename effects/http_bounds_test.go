package effects_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
)

// The 2xx range at its bounds: 200 and 299 succeed, 300 does not: a 300
// is a redirect, a definite failure, never a success (1xx is left out: a
// server cannot end an answer on one). (Kills the
// mutation survivors of http.go's 2xx bounds; docs/mutation.md.)
func TestHTTPSuccessIsExactlyTheTwoHundreds(t *testing.T) {
	for _, tc := range []struct {
		code int
		ok   bool
	}{{200, true}, {204, true}, {299, true}, {300, false}} {
		remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.code)
		}))
		_, err := effects.HTTP(nil, post(remote.URL), noRef)(context.Background(), "sbx-1")
		remote.Close()
		if tc.ok {
			require.NoError(t, err, "%d", tc.code)
			continue
		}
		require.Error(t, err, "%d", tc.code)
		require.True(t, effects.IsDefinite(err), "%d: %v", tc.code, err)
	}
}
