package chaos

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// diskFullLimit is the file size a "full" process may still write up to:
// small enough that the WAL and the database file cannot grow.
const diskFullLimit = 32 << 10

// fillDisk makes this process's disk "full" for d: RLIMIT_FSIZE caps every
// file it writes, and SIGXFSZ is ignored so the write fails with EFBIG
// instead of killing the process, exactly as a full disk fails a write.
// After d the limit is lifted, as when an operator frees space, and the
// consumer must resume on its own.
func fillDisk(ctx context.Context, d time.Duration, log func(string)) error {
	signal.Ignore(syscall.SIGXFSZ)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		return fmt.Errorf("disk full: getrlimit: %w", err)
	}
	full := syscall.Rlimit{Cur: diskFullLimit, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		return fmt.Errorf("disk full: setrlimit: %w", err)
	}
	log(fmt.Sprintf("chaos: disk full (files capped at %d bytes) for %s", diskFullLimit, d))
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: lift disk full:", err)
			return
		}
		log("chaos: space freed; the consumer must resume")
	}()
	return nil
}
