package effects_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// An answer that says the request was not processed (429, 408), or a
// request that never left the process (refused connection, a header
// net/http will not send), certainly took no effect: the ledger records
// the call failed, not uncertain, so no operator is asked to reconcile a
// call that never happened, and the next attempt simply calls again.
func TestCallsThatCertainlyTookNoEffectAreFailedNotUncertain(t *testing.T) {
	var answered atomic.Int64
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch answered.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusRequestTimeout)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	t.Cleanup(remote.Close)
	// A port nobody listens on: the dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	badHeader := func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, remote.URL, strings.NewReader(`{}`))
		if err == nil {
			req.Header.Set("X-Note", "two\nlines")
		}
		return req, err
	}
	stores(t, func(t *testing.T, st store.Store) {
		answered.Store(0)
		l, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		ctx := context.Background()
		for _, tc := range []struct {
			name     string
			call     effects.Call
			definite bool
			after    time.Duration
		}{
			{"429", effects.HTTP(nil, post(remote.URL), noRef), false, 3 * time.Second},
			{"408", effects.HTTP(nil, post(remote.URL), noRef), false, 0},
			{"connection refused", effects.HTTP(nil, post(refused), noRef), false, 0},
			{"header net/http will not send", effects.HTTP(nil, badHeader, noRef), true, 0},
		} {
			_, err := l.DoFor(ctx, msg, "crm.create_task", tc.call)
			require.Error(t, err, tc.name)
			var unc *effects.UncertainError
			require.False(t, errors.As(err, &unc), "%s: a call that took no effect is not uncertain: %v", tc.name, err)
			require.True(t, effects.IsNotApplied(err), "%s: %v", tc.name, err)
			require.Equal(t, tc.definite, effects.IsDefinite(err), "%s: %v", tc.name, err)
			after, ok := seqbox.RetryAfterOf(err)
			require.Equal(t, tc.after != 0, ok, tc.name)
			require.Equal(t, tc.after, after, tc.name)
			require.Equal(t, effects.Failed, state(t, l).State, tc.name)
		}
		// The next attempt calls again under the same key.
		ref, err := l.DoFor(ctx, msg, "crm.create_task", effects.HTTP(nil, post(remote.URL), noRef))
		require.NoError(t, err)
		require.Equal(t, "ok", ref)
		e := state(t, l)
		require.Equal(t, effects.Succeeded, e.State)
		require.Equal(t, 5, e.Calls)
	})
}

// NotApplied and Definite: both say the call took no effect; only
// Definite says another attempt cannot help.
func TestNotAppliedIsTransientDefiniteIsNot(t *testing.T) {
	base := errors.New("agent answered 503")
	na := effects.NotApplied(base)
	require.True(t, effects.IsNotApplied(na))
	require.False(t, effects.IsDefinite(na))
	require.ErrorIs(t, na, base)
	d := effects.Definite(base)
	require.True(t, effects.IsNotApplied(d))
	require.True(t, effects.IsDefinite(d))
	require.NoError(t, effects.NotApplied(nil))
	require.False(t, effects.IsNotApplied(base))
	// The delay the remote side asked for survives the wrapping.
	ra := effects.NotApplied(seqbox.RetryAfter(base, time.Second))
	after, ok := seqbox.RetryAfterOf(ra)
	require.True(t, ok)
	require.Equal(t, time.Second, after)
}
