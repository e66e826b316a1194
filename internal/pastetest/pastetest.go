// Package pastetest runs a document's shell blocks as a reader pastes
// them: in bash, in a copy of the checkout, with the programs they need
// (docs that "run as pasted": the README's gateway quick start,
// docs/agents.md's Python quick start).
package pastetest

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/waitfor"
)

// Block is the ```sh block that follows marker in doc (named docName in
// failures).
func Block(t *testing.T, docName, doc, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("%s has no %q marker before its block", docName, marker)
	}
	_, after, ok = strings.Cut(after, "\n```sh\n")
	if !ok {
		t.Fatalf("%s has no ```sh block after %q", docName, marker)
	}
	block, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatalf("%s's block after %q does not end", docName, marker)
	}
	return block + "\n"
}

// Need finds a program a block uses. Without it the test fails under
// CI=true and is skipped elsewhere.
func Need(t *testing.T, what, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s needs %s, which is not on PATH: %v", what, name, err)
		}
		t.Skipf("%s needs %s, which is not on PATH (CI fails here instead)", what, name)
	}
}

// FreePort is a loopback address nothing listens on now.
func FreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// GoEnv is one of the go command's settings.
func GoEnv(t *testing.T, name string) string {
	t.Helper()
	b, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(b))
}

// CopyTree copies the checkout at src into dst: a block runs in a clone
// of its own, and the databases it makes stay there. It copies what git
// tracks or would (nothing ignored, such as a seqbox.db left by pasting
// a block in the checkout); without git, every file but .git and
// databases.
func CopyTree(t *testing.T, src, dst string) {
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

// Bash is a bash process that blocks are pasted into, in its own process
// group (the background jobs die with it), what it prints kept in a file.
type Bash struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	log    string
	exited chan error
}

// StartBash starts bash in dir with env added to the test's environment;
// the test's end kills its process group, and shows what it printed when
// the test failed.
func StartBash(t *testing.T, dir string, env ...string) *Bash {
	t.Helper()
	b := &Bash{t: t, cmd: exec.Command("bash"), exited: make(chan error, 1)}
	b.cmd.Dir = dir
	b.cmd.Env = append(os.Environ(), env...)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.Create(filepath.Join(t.TempDir(), "printed"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	b.log = log.Name()
	b.cmd.Stdout, b.cmd.Stderr = log, log
	if b.stdin, err = b.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.exited <- b.cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("the blocks printed:\n%s", b.Printed())
		}
	})
	return b
}

// Paste writes a block to bash's input.
func (b *Bash) Paste(block string) {
	b.t.Helper()
	if _, err := io.WriteString(b.stdin, block); err != nil {
		b.t.Fatal(err)
	}
}

// Printed is what the blocks printed so far.
func (b *Bash) Printed() string {
	b.t.Helper()
	out, err := os.ReadFile(b.log)
	if err != nil {
		b.t.Fatal(err)
	}
	return string(out)
}

// End closes bash's input and waits for it to exit cleanly (within
// within).
func (b *Bash) End(within time.Duration) {
	b.t.Helper()
	b.stdin.Close()
	select {
	case err := <-b.exited:
		if err != nil {
			b.t.Fatalf("bash: %v", err)
		}
	case <-time.After(within):
		b.t.Fatalf("the blocks did not end within %s of the last", within)
	}
}

// Blocks reads the document at path (relative to the test's package
// directory) and returns the ```sh block after each marker.
func Blocks(t *testing.T, path string, markers ...string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range markers {
		out = append(out, Block(t, filepath.Base(path), string(raw), m))
	}
	return out
}

// Clone copies the checkout whose root is root (relative to the test's
// package directory) into a temporary directory, and returns it with the
// go settings a block's `go install` needs: a GOPATH of the test's, the
// module and build caches of the user's.
func Clone(t *testing.T, root string) (dir, gopath string, env []string) {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir, gopath = filepath.Join(t.TempDir(), "seqbox"), t.TempDir()
	CopyTree(t, abs, dir)
	return dir, gopath, []string{"GOPATH=" + gopath, "GOBIN=", "GOMODCACHE=" + GoEnv(t, "GOMODCACHE"), "GOCACHE=" + GoEnv(t, "GOCACHE")}
}

// Agent is a document's quick start for an example agent in front of
// seqbox serve, in two blocks: the first starts both and sends an event,
// the second stops them.
type Agent struct {
	// Doc is the document's path; Start and End mark its two blocks.
	Doc, Start, End string
	// Done is the line the agent prints once the event is done; the
	// second block is pasted after it, waited for at most Wait.
	Done string
	Wait time.Duration
	// Once are lines the output holds exactly once (Done is one too).
	Once []string
}

// RunAgent pastes a's blocks into bash in a copy of the checkout at root,
// as a reader does: the first, then, once the agent printed Done, the
// second. Only the ports differ (GATEWAY and AGENT, which the blocks
// read), and go install writes into a GOPATH of the test's.
func RunAgent(t *testing.T, root string, a Agent) {
	t.Helper()
	blocks := Blocks(t, a.Doc, a.Start, a.End)
	clone, _, env := Clone(t, root)
	gateway, agent := FreePort(t), FreePort(t)
	bash := StartBash(t, clone, append(env, "GATEWAY="+gateway, "AGENT="+agent)...)
	bash.Paste(blocks[0])
	waitfor.That(t, a.Wait, "the agent to print the event done", func() bool {
		return strings.Contains(bash.Printed(), a.Done)
	})
	bash.Paste(blocks[1])
	bash.End(time.Minute)
	got := bash.Printed()
	for _, want := range append(a.Once, a.Done) {
		if strings.Count(got, want) != 1 {
			t.Errorf("the output has %q %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
}
