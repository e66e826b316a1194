package demo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// worker is one demo worker process: the seqbox binary running
// `seqbox demo worker`, which the lab can kill with SIGKILL at any time.
type worker struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	mu   sync.Mutex
	shot bool // killed by the lab
}

// startWorker starts self (the seqbox binary) as a demo worker; its output
// goes to w.
func startWorker(self string, w io.Writer, env []string, args ...string) (*worker, error) {
	cmd := exec.Command(self, append([]string{"demo", "worker"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = w, w
	// A worker dies with the lab.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start demo worker: %w", err)
	}
	p := &worker{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL: the process dies wherever it is.
func (p *worker) kill() {
	p.mu.Lock()
	p.shot = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
}

// wait waits for the process; killed reports a death by SIGKILL, from the
// lab or from a fault point the worker was armed with.
func (p *worker) wait() (killed bool, err error) {
	<-p.done
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	return false, p.err
}
