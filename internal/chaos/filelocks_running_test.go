package chaos

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// A process killed and not yet reaped is a zombie: not running, so its
// released lock is not reported as a live process's missing one.
func TestRunningTellsAZombieFromALiveProcess(t *testing.T) {
	require.True(t, running(os.Getpid()))
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	require.True(t, running(cmd.Process.Pid))
	require.NoError(t, cmd.Process.Kill())
	// Not reaped yet: wait until the kernel shows it exited.
	for running(cmd.Process.Pid) {
		// The kill is delivered at once; the loop ends when the state turns Z.
	}
	_ = cmd.Wait()
	require.False(t, running(cmd.Process.Pid), "reaped: gone from /proc")
}
