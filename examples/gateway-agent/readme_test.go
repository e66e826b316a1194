// Package gatewayagent holds the test of the README's gateway quick start,
// which runs agent.py, the Python agent beside it.
package gatewayagent

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/seqbox/seqbox/internal/waitfor"
)

// The markers of the README's two blocks: the quick start, and what the
// reader pastes after the agent printed the event.
const (
	startMarker = "<!-- gateway quick start: "
	endMarker   = "<!-- gateway quick start, the end: "
)

// readmeBlock is the ```sh block that follows marker in readme.
func readmeBlock(t *testing.T, readme, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, marker)
	if !ok {
		t.Fatalf("README.md has no %q marker before the gateway quick start's block", marker)
	}
	_, after, ok = strings.Cut(after, "\n```sh\n")
	if !ok {
		t.Fatalf("README.md has no ```sh block after %q", marker)
	}
	block, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatalf("README.md's block after %q does not end", marker)
	}
	return block + "\n"
}

// need finds a program the quick start uses. Without it the test fails
// under CI=true and is skipped elsewhere.
func need(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the gateway quick start needs %s, which is not on PATH: %v", name, err)
		}
		t.Skipf("the gateway quick start needs %s, which is not on PATH (CI fails here instead)", name)
	}
}

// freePort is a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// copyTree copies the checkout at src into dst: the quick start runs in
// a clone of its own, and its seqbox.db stays there. It copies what git
// tracks or would (nothing ignored, such as a seqbox.db left by pasting
// the quick start in the checkout); without git, every file but .git and
// databases.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	var files []string
	if out, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, filepath.FromSlash(f))
			}
		}
	} else {
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == ".git":
				return filepath.SkipDir
			case !d.Type().IsRegular() || strings.Contains(d.Name(), ".db"):
				return nil
			}
			rel, err := filepath.Rel(src, path)
			files = append(files, rel)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		info, err := os.Lstat(filepath.Join(src, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestREADMEGatewayQuickStartRunsAsPasted pastes the README's gateway
// quick start into bash, in a copy of the checkout, as a reader would:
// the first block, then, once the agent printed the event, the second.
// Only the ports differ (GATEWAY and AGENT, which the block reads), and
// go install writes into a GOPATH of the test's.
func TestREADMEGatewayQuickStartRunsAsPasted(t *testing.T) {
	shorttest.Skip(t, "the README's gateway quick start (it builds and runs seqbox serve)")
	for _, p := range []string{"bash", "go", "python3", "curl", "openssl"} {
		need(t, p)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start, end := readmeBlock(t, readme, startMarker), readmeBlock(t, readme, endMarker)

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "seqbox")
	copyTree(t, root, clone)
	gopath := t.TempDir()
	modcache, gocache := goEnv(t, "GOMODCACHE"), goEnv(t, "GOCACHE")
	gateway, agent := freePort(t), freePort(t)

	bash := exec.Command("bash")
	bash.Dir = clone
	bash.Env = append(os.Environ(), "GOPATH="+gopath, "GOBIN=", "GOMODCACHE="+modcache, "GOCACHE="+gocache,
		"GATEWAY="+gateway, "AGENT="+agent, "SEQBOX_ADMIN_TOKEN=")
	// Its own process group: the background jobs are killed with it if
	// the block does not stop them.
	bash.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// What the blocks print goes to a file, read as it grows.
	log, err := os.Create(filepath.Join(t.TempDir(), "printed"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	bash.Stdout, bash.Stderr = log, log
	printed := func() string {
		b, err := os.ReadFile(log.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	stdin, err := bash.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bash.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- bash.Wait() }()
	defer func() {
		_ = syscall.Kill(-bash.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("the blocks printed:\n%s", printed())
		}
	}()

	if _, err := io.WriteString(stdin, start); err != nil {
		t.Fatal(err)
	}
	applied := "agent: applied deal.won to opp-1 version 1 (event evt-1 from crm)"
	waitfor.That(t, 3*time.Minute, "the agent to print the event", func() bool {
		return strings.Contains(printed(), applied)
	})
	if _, err := io.WriteString(stdin, end); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the blocks did not end within a minute of the second")
	}

	got := printed()
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

// goEnv is one of the go command's settings.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	b, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(b))
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
