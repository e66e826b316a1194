package effects_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

func post(url string) effects.HTTPRequest {
	return func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"task":"follow up"}`))
	}
}

func noRef(*http.Response) (string, error) { return "ok", nil }

// A redirect is never followed: a 302 would turn the POST into a bodiless
// GET (which answered 2xx and looked succeeded), a 307 would send the
// body and the Idempotency-Key wherever Location points. The 3xx is a
// definite failure naming where it pointed.
func TestHTTPDoesNotFollowRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer other.Close()
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/moved", code)
		}))
		_, err := effects.HTTP(&http.Client{}, post(remote.URL), noRef)(context.Background(), "sbx-1")
		remote.Close()
		require.Error(t, err, "%d", code)
		require.True(t, effects.IsDefinite(err), "%d: %v", code, err)
		require.Contains(t, err.Error(), "not followed")
		require.Contains(t, err.Error(), other.URL+"/moved")
	}
	require.Zero(t, elsewhere.Load(), "the request went where the redirect pointed")
	// The caller's client keeps its own redirect policy.
	c := &http.Client{}
	_ = effects.HTTP(c, post(other.URL), noRef)
	require.Nil(t, c.CheckRedirect)
}

// 408 and 429 are transient, with the Retry-After the remote asked for
// kept for the pipeline; other 4xx are definite; 5xx uncertain.
func TestHTTPFailureClasses(t *testing.T) {
	for _, tc := range []struct {
		code       int
		retryAfter string
		definite   bool
		after      time.Duration
	}{
		{http.StatusTooManyRequests, "7", false, 7 * time.Second},
		{http.StatusRequestTimeout, "", false, 0},
		{http.StatusServiceUnavailable, "2", false, 2 * time.Second},
		{http.StatusInternalServerError, "", false, 0},
		{http.StatusUnprocessableEntity, "", true, 0},
		{http.StatusConflict, "", false, 0},
	} {
		remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.retryAfter != "" {
				w.Header().Set("Retry-After", tc.retryAfter)
			}
			w.WriteHeader(tc.code)
		}))
		_, err := effects.HTTP(nil, post(remote.URL), noRef)(context.Background(), "sbx-1")
		remote.Close()
		require.Error(t, err)
		require.Equal(t, tc.definite, effects.IsDefinite(err), "%d: %v", tc.code, err)
		after, ok := seqbox.RetryAfterOf(err)
		require.Equal(t, tc.after != 0, ok, "%d", tc.code)
		require.Equal(t, tc.after, after)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{"0": 0, "120": 2 * time.Minute, "Tue, 01 Dec 2026 12:00:30 GMT": 30 * time.Second,
		"Tue, 01 Dec 2026 11:00:00 GMT": 0, "99999999": 24 * time.Hour} {
		got, ok := effects.ParseRetryAfter(h, now)
		require.True(t, ok, h)
		require.Equal(t, want, got, h)
	}
	for _, h := range []string{"", "-1", "soon", "1.5"} {
		_, ok := effects.ParseRetryAfter(h, now)
		require.False(t, ok, h)
	}
}

// A call that panics may have reached the remote side: it is recorded
// uncertain, and the caller's process carries on.
func TestPanickingCallIsUncertain(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	defer st.Close()
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	_, err = l.DoFor(context.Background(), msg, "crm.create_task", func(context.Context, string) (string, error) {
		panic("nil map in the client")
	})
	var unc *effects.UncertainError
	require.ErrorAs(t, err, &unc)
	require.Contains(t, err.Error(), "panicked")
	require.Equal(t, effects.Uncertain, state(t, l).State)
}

// ReconcileHTTP: a 2xx lookup is applied with its reference, a 404 is not
// applied, anything else leaves the call uncertain; no redirect is
// followed.
func TestReconcileHTTP(t *testing.T) {
	for code, want := range map[int]string{http.StatusOK: "applied task-9", http.StatusNotFound: "not applied",
		http.StatusInternalServerError: "error", http.StatusFound: "error"} {
		remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/tasks/sbx-1", r.URL.Path)
			if code == http.StatusFound {
				http.Redirect(w, r, "/elsewhere", code)
				return
			}
			w.WriteHeader(code)
			_, _ = w.Write([]byte("task-9"))
		}))
		rec := effects.ReconcileHTTP(nil, func(ctx context.Context, e effects.Effect) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, remote.URL+"/tasks/"+e.IdempotencyKey, nil)
		}, func(resp *http.Response) (string, error) {
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		})
		r, err := rec(context.Background(), effects.Effect{IdempotencyKey: "sbx-1"})
		remote.Close()
		got := "error"
		switch {
		case err != nil:
		case r.Applied:
			got = "applied " + r.Ref
		default:
			got = "not applied"
		}
		require.Equal(t, want, got, "%d: %v", code, err)
	}
}
