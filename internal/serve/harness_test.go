package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/stretchr/testify/require"
)

const testToken = "test-admin-token-0123456789"

// running is a Server serving on a loopback port for one test.
type running struct {
	*Server
	url  string
	stop func()
}

// storeURLs are the databases the store-dependent tests run on.
func storeURLs(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "seqbox.db") },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	}
}

// start runs a server with opt (DB defaults to a fresh SQLite file) until
// the test ends.
func start(t *testing.T, opt Options) *running {
	t.Helper()
	if opt.DB == "" {
		opt.DB = filepath.Join(t.TempDir(), "seqbox.db")
	}
	switch opt.AdminToken {
	case "":
		opt.AdminToken = testToken
	case "-":
		opt.AdminToken = "" // admin disabled
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.PurgeEvery == 0 {
		opt.PurgeEvery = -1
	}
	if opt.RequestWait == 0 {
		opt.RequestWait = 10 * time.Second
	}
	if opt.Policy.Retry.InitialBackoff == 0 {
		opt.Policy.Retry.InitialBackoff = 50 * time.Millisecond
		opt.Policy.Retry.MaxBackoff = 200 * time.Millisecond
	}
	opt.Addr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, opt)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	r := &running{Server: s, url: "http://" + ln.Addr().String()}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(r.stop)
	return r
}

// call sends a request and returns the status and the decoded JSON body.
func (r *running) call(t *testing.T, method, path, token string, headers map[string]string, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 && raw[0] == '{' {
		require.NoError(t, json.Unmarshal(raw, &m), "body %s", raw)
	}
	return resp.StatusCode, m, resp.Header
}

// post ingests one structured event and requires 202.
func (r *running) post(t *testing.T, event string) {
	t.Helper()
	r.postWant(t, event, http.StatusAccepted)
}

// postWant ingests one structured event, requires the status want and
// returns the body.
func (r *running) postWant(t *testing.T, event string, want int) map[string]any {
	t.Helper()
	code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured}, event)
	require.Equal(t, want, code, "%v", body)
	return body
}

// admin calls the admin API with the token and requires want.
func (r *running) admin(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	code, m, _ := r.call(t, method, path, testToken, map[string]string{"Content-Type": "application/json"}, body)
	require.Equal(t, want, code, "%s %s: %v", method, path, m)
	return m
}

// effects counts the record handler's effect rows.
func (r *running) effects(t *testing.T) int64 {
	t.Helper()
	n, err := replay.Effects(context.Background(), r.store.DB(), r.opt.Consumer)
	require.NoError(t, err)
	return n
}

// eventually polls cond every 20 ms for up to 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.That(t, 15*time.Second, what, cond)
}

// list returns body[name] as a slice of objects.
func list(t *testing.T, body map[string]any, name string) []map[string]any {
	t.Helper()
	raw, ok := body[name].([]any)
	require.True(t, ok, "%s is not a list in %v", name, body)
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}
