package chaos

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolders returns the processes that hold a POSIX lock on the file at
// path, from the kernel's table (/proc/locks): a process with a SQLite
// database open in WAL mode holds a shared lock on it for as long as a
// connection of it is open. One that holds none is invisible to the
// others: the next to close its last connection cleanly takes itself for
// the last, checkpoints and deletes the -wal and -shm under it
// (docs/design.md §15.1).
func lockHolders(path string) (map[int]bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("no inode for %s", path)
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	return parseLockHolders(string(table), sys.Ino), nil
}

// parseLockHolders reads a /proc/locks table: the pids holding a POSIX
// lock on inode ino. A line is "1: POSIX  ADVISORY  READ 4242
// fe:00:10986261 128 128"; a waiter's line has "->" after its number and
// holds nothing.
func parseLockHolders(table string, ino uint64) map[int]bool {
	holders := map[int]bool{}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[1] != "POSIX" {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 || dev[2] != strconv.FormatUint(ino, 10) {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			holders[pid] = true
		}
	}
	return holders
}

// workerReady is what a consume-mode worker writes once its store and
// transport are open.
const workerReady = "chaos worker: store and transport open"

// readyWorkers are the workers of procs that said workerReady: one just
// restarted may not have opened the file yet.
func readyWorkers(procs []*proc) []*proc {
	var out []*proc
	for _, p := range procs {
		if p != nil && strings.Contains(p.output.String(), workerReady) {
			out = append(out, p)
		}
	}
	return out
}

// unlocked names each live process of procs that holds no lock on the
// SQLite file at db (nothing for a PostgreSQL URL), or why the table
// could not be read.
func unlocked(db string, procs []*proc) []string {
	if db == "" || strings.Contains(db, "://") {
		return nil
	}
	holders, err := lockHolders(db)
	if err != nil {
		return []string{fmt.Sprintf("read the locks on %s: %v", db, err)}
	}
	var out []string
	for _, p := range procs {
		if p != nil && !p.exited() && !holders[p.cmd.Process.Pid] && running(p.cmd.Process.Pid) {
			out = append(out, fmt.Sprintf("%s (pid %d) holds no lock on %s: another process's clean close would delete the -wal under it",
				p.name, p.cmd.Process.Pid, db))
		}
	}
	return out
}

// running reports whether process pid is still running: a process killed
// a moment ago has let its locks go while the harness has not reaped it
// yet (a zombie, or gone from /proc), and is no process whose missing
// lock matters (TestChaosSQLite's outbox-chain failed once on one).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X' && state != 'x'
}

// checkLocks fails the scenario for each live serve process that holds no
// lock on the SQLite file it serves.
func (s *serveRun) checkLocks() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	for _, why := range unlocked(s.db, procs[:]) {
		s.res.fail("%s", why)
	}
}
