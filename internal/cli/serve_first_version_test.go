package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the command's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// wrote is told each write (a test waiting for a line waits on it).
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A producer that does not wait for one event's 202 before posting the
// key's next one (two batch requests in flight at once) may have the
// later version accepted first. Without a first version, that one becomes
// the key's baseline and the earlier one is stale. `serve
// --first-version 1` holds the later one until version 1 arrives, so the
// agent receives both, in version order.
func TestServeFirstVersionHoldsALaterVersionAcceptedFirst(t *testing.T) {
	var mu sync.Mutex
	var got []string
	received := make(chan struct{}, 64)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusOK) // the circuit's HEAD probe
			return
		}
		var ev struct{ ID string }
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &ev)
		mu.Lock()
		got = append(got, ev.ID)
		mu.Unlock()
		received <- struct{}{}
		w.WriteHeader(http.StatusOK)
	}))
	defer agent.Close()

	ctx, cancel := context.WithCancel(context.Background())
	out := newSyncBuffer()
	cmd := serveCmd()
	cmd.SetArgs([]string{"--db", filepath.Join(t.TempDir(), "seqbox.db"), "--addr", "127.0.0.1:0",
		"--agent-url", agent.URL, "--first-version", "1", "--log-level", "info"})
	cmd.SetOut(out)
	cmd.SetErr(out)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop\n%s", out.String())
		}
	}()

	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var base string
	for timeout := time.After(30 * time.Second); base == ""; {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve ended before listening: %v\n%s", err, out.String())
		case <-out.wrote:
		case <-timeout:
			t.Fatalf("serve did not listen\n%s", out.String())
		}
	}

	// Version 2 of each key is accepted (202) before its version 1.
	keys := []string{"k1", "k2", "k3"}
	post := func(version int) {
		var evs []string
		for _, k := range keys {
			evs = append(evs, fmt.Sprintf(`{"specversion":"1.0","id":"%s-v%d","source":"crm","type":"order.updated","partitionkey":"%s","objectversion":%d,"data":{}}`,
				k, version, k, version))
		}
		resp, err := http.Post(base+"/v1/events", "application/cloudevents-batch+json",
			strings.NewReader("["+strings.Join(evs, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST version %d: %s: %s", version, resp.Status, body)
		}
	}
	post(2)
	post(1)

	want := 2 * len(keys)
	timeout := time.After(60 * time.Second)
	for range want {
		select {
		case <-received:
		case <-timeout:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the agent received %v, want all %d events: a version accepted before its predecessor was lost\n%s",
				got, want, out.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Fatalf("the agent received %v, want each of %d events once", got, want)
	}
	for _, k := range keys {
		v1, v2 := slices.Index(got, k+"-v1"), slices.Index(got, k+"-v2")
		if v1 < 0 || v2 < 0 || v1 > v2 {
			t.Errorf("key %s: the agent received %v, want %s-v1 before %s-v2", k, got, k, k)
		}
	}
}

// --first-version is a version, or -1 for the first version seen.
func TestServeFirstVersionRefusesANegativeVersion(t *testing.T) {
	cmd := serveCmd()
	cmd.SetArgs([]string{"--db", filepath.Join(t.TempDir(), "seqbox.db"), "--addr", "127.0.0.1:0", "--first-version", "-2"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--first-version -2") {
		t.Fatalf("serve --first-version -2: %v, want it refused", err)
	}
}
