package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one chaos process the harness started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// output keeps the start of what the process wrote, for checks.
	output *capped
}

// capped is a goroutine-safe buffer that keeps the first 64 KiB, and,
// once record is called, everything written from then on (a goroutine
// dump after SIGQUIT).
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// rec, once set by record, gets every later write.
	rec *bytes.Buffer
}

func (c *capped) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := 64<<10 - c.buf.Len(); room > 0 {
		c.buf.Write(b[:min(len(b), room)])
	}
	if c.rec != nil {
		c.rec.Write(b)
	}
	return len(b), nil
}

// record starts keeping every write from now on; recorded returns them.
func (c *capped) record() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rec = &bytes.Buffer{}
}

// recorded is what was written since record.
func (c *capped) recorded() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rec == nil {
		return ""
	}
	return c.rec.String()
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (h *harness) start(name string, env []string, args ...string) (*proc, error) {
	return startProc(h.opt.Self, h.opt.ProcLog, name, env, append([]string{"chaos", "worker"}, args...)...)
}

// startProc starts self with args as a chaos process.
func startProc(self string, log io.Writer, name string, env []string, args ...string) (*proc, error) {
	return startCmd(log, name, env, self, args...)
}

// startCmd starts the program path with args as a chaos process (an SDK's
// agent, a serve).
func startCmd(log io.Writer, name string, env []string, path string, args ...string) (*proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	// A worker dies with the harness: a harness killed by a timeout must
	// not leave consumers running against brokers and files.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &capped{}
	cmd.Stdout = io.MultiWriter(log, out)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), output: out}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// killedBySIGKILL reports whether the process died of SIGKILL (its own, at a
// fault point, or the harness's).
func (p *proc) killedBySIGKILL() bool {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// quit sends SIGQUIT, on which a Go program writes every goroutine's
// stack and exits, and returns what it wrote since;
// SIGKILL if it has not exited within grace.
func (p *proc) quit(grace time.Duration) string {
	if p.exited() {
		return ""
	}
	p.output.record()
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
	return p.output.recorded()
}

// stop asks for a clean shutdown and waits; SIGKILL after a grace period.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("%s did not stop within %s", p.name, grace)
	}
}

// runOnce runs a one-shot process to its end.
func (h *harness) runOnce(ctx context.Context, name string, env []string, args ...string) (*proc, error) {
	p, err := h.start(name, env, args...)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill()
		return p, ctx.Err()
	}
	return p, nil
}
