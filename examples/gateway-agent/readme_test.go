// Package gatewayagent holds the test of the README's gateway quick start,
// which runs agent.py, the Python agent beside it.
package gatewayagent

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/internal/waitfor"
)

// The markers of the README's two blocks: the quick start, and what the
// reader pastes after the agent printed the event.
const (
	startMarker = "<!-- gateway quick start: "
	endMarker   = "<!-- gateway quick start, the end: "
)

// TestREADMEGatewayQuickStartRunsAsPasted pastes the README's gateway
// quick start into bash, in a copy of the checkout, as a reader would:
// the first block, then, once the agent printed the event, the second.
// Only the ports differ (GATEWAY and AGENT, which the block reads), and
// go install writes into a GOPATH of the test's.
func TestREADMEGatewayQuickStartRunsAsPasted(t *testing.T) {
	shorttest.Skip(t, "the README's gateway quick start (it builds and runs seqbox serve)")
	for _, p := range []string{"bash", "go", "python3", "curl", "openssl"} {
		pastetest.Need(t, "the gateway quick start", p)
	}
	blocks := pastetest.Blocks(t, filepath.Join("..", "..", "README.md"), startMarker, endMarker)
	start, end := blocks[0], blocks[1]
	clone, gopath, env := pastetest.Clone(t, filepath.Join("..", ".."))
	gateway, agent := pastetest.FreePort(t), pastetest.FreePort(t)
	bash := pastetest.StartBash(t, clone, append(env, "GATEWAY="+gateway, "AGENT="+agent, "SEQBOX_ADMIN_TOKEN=")...)
	bash.Paste(start)
	applied := "agent: applied deal.won to opp-1 version 1 (event evt-1 from crm)"
	waitfor.That(t, 3*time.Minute, "the agent to print the event", func() bool {
		return strings.Contains(bash.Printed(), applied)
	})
	bash.Paste(end)
	bash.End(time.Minute)

	got := bash.Printed()
	token := regexp.MustCompile(`(?m)^admin token: ([0-9a-f]{32})$`).FindStringSubmatch(got)
	if token == nil {
		t.Fatalf("the block did not show a 32-digit admin token:\n%s", got)
	}
	for _, want := range []string{
		"seqbox serve: listening on http://" + gateway,
		`"status":"ready"`,
		applied,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q:\n%s", want, got)
		}
	}
	// Nothing went wrong on the way: the agent was up before the event.
	if strings.Contains(got, "level=WARN") || strings.Contains(got, "level=ERROR") {
		t.Errorf("seqbox serve logged a failure:\n%s", got)
	}
	if n := strings.Count(got, "agent: applied"); n != 1 {
		t.Errorf("the agent applied %d events, want 1:\n%s", n, got)
	}
	// keys list --all through the admin API, with the token the block
	// kept: the key and the version the agent applied.
	if !regexp.MustCompile(`(?m)^opp-1\s+ok\s+1\s`).MatchString(got) {
		t.Errorf("keys list --all --server did not list opp-1 at version 1:\n%s", got)
	}
	// Both stopped: nothing answers on either port.
	for _, addr := range []string{gateway, agent} {
		waitfor.That(t, 30*time.Second, addr+" to stop answering", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err != nil
		})
	}
	// The admin API refuses another token and takes the block's.
	checkToken(t, clone, gopath, gateway, token[1])
}

// checkToken starts the installed seqbox serve again on the quick start's
// database with the token the block printed, and checks that the admin API
// answers with it and refuses a request without it.
func checkToken(t *testing.T, clone, gopath, gateway, token string) {
	t.Helper()
	serve := exec.Command(filepath.Join(gopath, "bin", "seqbox"), "serve", "--db", "seqbox.db", "--addr", gateway)
	serve.Dir = clone
	serve.Env = append(os.Environ(), "SEQBOX_ADMIN_TOKEN="+token)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = serve.Stdout
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = serve.Process.Kill()
		_ = serve.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.Contains(lines.Text(), "listening on") {
		t.Fatalf("seqbox serve did not start: %q", lines.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	for _, c := range []struct {
		token string
		want  int
	}{{token, 200}, {"", 401}, {strings.Repeat("0", 32), 401}} {
		req, err := http.NewRequest(http.MethodGet, "http://"+gateway+"/v1/admin/keys?all=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.StatusCode; got != c.want {
			t.Errorf("GET /v1/admin/keys with token %q: %d, want %d", c.token, got, c.want)
		}
	}
}
