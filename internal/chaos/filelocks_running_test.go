package chaos

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A process killed and not yet reaped is a zombie: not running, so its
// released lock is not reported as a live process's missing one.
func TestRunningTellsAZombieFromALiveProcess(t *testing.T) {
	require.True(t, running(os.Getpid()))
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	require.True(t, running(cmd.Process.Pid))
	require.NoError(t, cmd.Process.Kill())
	// Wait for it to exit without reaping it (WNOWAIT): a zombie now.
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil))
	require.False(t, running(cmd.Process.Pid), "a zombie is not running")
	_ = cmd.Wait()
	require.False(t, running(cmd.Process.Pid), "reaped: gone from /proc")
}
