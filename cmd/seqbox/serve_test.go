package main

// The tests of `seqbox serve` run the built binary on a free loopback port
// and talk to it over real HTTP, on SQLite and on PostgreSQL.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/stretchr/testify/require"
)

const serveToken = "serve-test-admin-token-0123"

// server is one `seqbox serve` process.
type server struct {
	url    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

// safeBuffer writes to a server's buffer under its lock.
type safeBuffer struct {
	s *server
	b *bytes.Buffer
}

func (w safeBuffer) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.b.Write(p)
}

// startServe runs seqbox serve with args on 127.0.0.1:0 (unless args
// name --addr) and waits for its "listening on" line.
func startServe(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	s := &server{done: make(chan struct{})}
	hasAddr := false
	for _, a := range args {
		hasAddr = hasAddr || strings.HasPrefix(a, "--addr")
	}
	if !hasAddr {
		args = append(args, "--addr", "127.0.0.1:0")
	}
	s.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	s.cmd.Env = append(environ(), env...)
	s.cmd.Dir = t.TempDir()
	stderr, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	s.cmd.Stdout = safeBuffer{s, &s.out}
	require.NoError(t, s.cmd.Start())
	// serve logs through slog only, on stderr: its "listening on" record
	// names the address.
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		first := true
		for sc.Scan() {
			_, _ = safeBuffer{s, &s.stderr}.Write([]byte(sc.Text() + "\n"))
			if first && strings.Contains(sc.Text(), "seqbox serve: listening on ") {
				lines <- sc.Text()
				first = false
			}
		}
		close(lines)
	}()
	go func() {
		err := s.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			s.code = ee.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	select {
	case line, ok := <-lines:
		require.True(t, ok, "serve exited before listening: %s", s.stderrText())
		_, u, found := strings.Cut(line, "seqbox serve: listening on ")
		require.True(t, found, "line %q", line)
		s.url = strings.FieldsFunc(u, func(r rune) bool { return r == '"' || r == ' ' })[0]
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start: %s", s.stderrText())
	}
	return s
}

func (s *server) stderrText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

func (s *server) stdoutText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// stop sends sig and returns the exit status.
func (s *server) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(sig))
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop after %v: %s", sig, s.stderrText())
	}
	return s.code
}

// do sends one request and decodes a JSON object answer.
func (s *server) do(t *testing.T, method, path, token string, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
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
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	}
	return resp.StatusCode, m
}

func (s *server) event(t *testing.T, e string) {
	t.Helper()
	code, body := s.do(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"}, e)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
}

func (s *server) admin(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	code, m := s.do(t, method, path, serveToken, map[string]string{"Content-Type": "application/json"}, body)
	require.Equal(t, want, code, "%s %s: %v", method, path, m)
	return m
}

// stuckKeys lists the stuck keys.
func (s *server) stuckKeys(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, k := range s.admin(t, "GET", "/v1/admin/keys", "", 200)["keys"].([]any) {
		out = append(out, k.(map[string]any))
	}
	return out
}

// outcome is what the audit says about an event id ("" when unseen).
func (s *server) outcome(t *testing.T, id string) string {
	t.Helper()
	ids := s.admin(t, "GET", "/v1/admin/audit?source=crm&id="+id, "", 200)["identities"].([]any)
	if len(ids) == 0 {
		return ""
	}
	return ids[0].(map[string]any)["inbox_outcome"].(string)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.That(t, 30*time.Second, what, cond)
}

func ce(id, key string, version int, data string) string {
	s := `{"specversion":"1.0","id":"` + id + `","source":"crm","type":"order.updated"`
	if key != "" {
		s += `,"partitionkey":"` + key + `","objectversion":` + strconv.Itoa(version)
	}
	if data != "" {
		s += `,"data":` + data
	}
	return s + "}"
}

// serveDBs are the databases the end-to-end test runs on.
func serveDBs() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "seqbox.db") },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	}
}

// The whole gateway through the binary: ingest in three modes, 400 naming
// the field, 401 without the token, a blocked key resolved through the
// admin API, metrics, and a clean exit on SIGTERM.
func TestServeEndToEnd(t *testing.T) {
	for name, db := range serveDBs() {
		t.Run(name, func(t *testing.T) {
			s := startServe(t, nil, "--db", db(t), "--admin-token", serveToken, "--retry-backoff", "50ms")
			s.event(t, ce("a1", "A", 1, `{"n":1}`))
			code, body := s.do(t, "POST", "/v1/events", "", map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "a2",
				"Ce-Source": "crm", "Ce-Type": "order.updated", "Ce-Partitionkey": "A", "Ce-Objectversion": "2",
				"Content-Type": "application/json"}, `{"n":2}`)
			require.Equal(t, 202, code, "%v", body)
			code, body = s.do(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents-batch+json"},
				"["+ce("a3", "A", 3, "")+","+ce("b1", "B", 1, "")+"]")
			require.Equal(t, 202, code, "%v", body)
			code, body = s.do(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
				`{"specversion":"1.0","id":"x","source":"crm","type":"t","partitionkey":"A","objectversion":"two"}`)
			require.Equal(t, 400, code)
			require.Equal(t, "objectversion", body["field"])

			// Without the token: 401, and nothing happens.
			code, _ = s.do(t, "GET", "/v1/admin/keys", "", nil, "")
			require.Equal(t, 401, code)

			// A poison message blocks its key; its successor parks behind it.
			s.event(t, ce("p1", "P", 1, `{"fail":"permanent"}`))
			s.event(t, ce("p2", "P", 2, ""))
			waitUntil(t, "P blocked with p2 behind", func() bool { return s.outcome(t, "p2") == "blocked" })
			keys := s.stuckKeys(t)
			require.Len(t, keys, 1)
			seq := keys[0]["blocked_by"].(map[string]any)["dlq_seq"].(float64)
			code, _ = s.do(t, "POST", "/v1/admin/dlq/"+itoaF(seq)+"/skip", "", nil, `{"by":"x","reason":"y"}`)
			require.Equal(t, 401, code)
			require.Len(t, s.stuckKeys(t), 1, "a refused request changes nothing")
			res := s.admin(t, "POST", "/v1/admin/dlq/"+itoaF(seq)+"/skip", `{"by":"alice","reason":"refunded by hand"}`, 200)
			require.Equal(t, "done", res["state"])
			require.Empty(t, s.stuckKeys(t))
			for _, id := range []string{"a1", "a2", "a3", "b1", "p2"} {
				waitUntil(t, id+" applied", func() bool { return s.outcome(t, id) == "applied" })
			}

			resp, err := http.Get(s.url + "/metrics")
			require.NoError(t, err)
			text, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Contains(t, string(text), `seqbox_deliveries_total{consumer="gateway",outcome="applied"}`)
			code, _ = s.do(t, "GET", "/readyz", "", nil, "")
			require.Equal(t, 200, code)

			require.Equal(t, 0, s.stop(t, syscall.SIGTERM), s.stderrText())
			require.Contains(t, s.stderrText(), "seqbox serve: stopped cleanly")
			require.Empty(t, s.stdoutText(), "serve writes nothing but its slog records, on stderr")
		})
	}
}

func itoaF(f float64) string { return strconv.FormatInt(int64(f), 10) }

// A non-loopback address without an admin token is refused with a
// one-line error and a non-zero exit, by flag and by environment.
func TestServeRefusesNonLoopbackWithoutToken(t *testing.T) {
	r := exe(t, "", "serve", "--db", filepath.Join(t.TempDir(), "s.db"), "--addr", "0.0.0.0:0")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "non-loopback")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, r.stderr)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--db", filepath.Join(t.TempDir(), "s.db"))
	cmd.Env = append(environ(), "SEQBOX_ADDR=0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "non-loopback")
}

// Every flag can come from SEQBOX_<FLAG>; a flag on the command line wins.
func TestServeFlagsFromEnvironment(t *testing.T) {
	s := startServe(t, []string{"SEQBOX_ADMIN_TOKEN=" + serveToken, "SEQBOX_CONSUMER=from-env", "SEQBOX_DB=" + filepath.Join(t.TempDir(), "e.db"),
		"SEQBOX_MAX_BODY=2048"})
	waitUntil(t, "the listening line", func() bool { return strings.Contains(s.stderrText(), "consumer=from-env") })
	ov := s.admin(t, "GET", "/v1/admin/overview", "", 200)
	require.Equal(t, "from-env", ov["consumer"])
	code, body := s.do(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"data":"`+strings.Repeat("x", 3000)+`"}`)
	require.Equal(t, 413, code, "%v", body)
	require.Equal(t, 0, s.stop(t, os.Interrupt))
}
