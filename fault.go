package seqbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// FaultPoint names a place in the pipeline where a crash can be injected.
type FaultPoint string

// The failure windows of the seed, in pipeline order.
const (
	FaultBeforeTx          FaultPoint = "before_tx"
	FaultAfterInboxInsert  FaultPoint = "after_inbox_insert"
	FaultAfterHandler      FaultPoint = "after_handler"
	FaultBeforeCommit      FaultPoint = "before_commit"
	FaultAfterCommit       FaultPoint = "after_commit_before_ack"
	FaultMidBatch          FaultPoint = "mid_batch"
	FaultDuringLeaseExtend FaultPoint = "during_lease_extend"
	FaultDuringRedrive     FaultPoint = "during_redrive"
	FaultDuringPurge       FaultPoint = "during_purge"
)

// FaultEnv names the environment variable that makes a consumer process kill
// itself with SIGKILL at a fault point: SEQBOX_FAULT=after_commit_before_ack
// kills at the first time that point is reached, SEQBOX_FAULT=point:N at the
// Nth. Used by the chaos harness; never set it in production.
const FaultEnv = "SEQBOX_FAULT"

// ErrCrash is what a Config.Faults hook returns (or wraps) to simulate a
// crash at a fault point: the batch is abandoned with nothing acked, its
// transaction rolled back as a dying process's would be, and Run returns.
var ErrCrash = errors.New("seqbox: injected crash")

var errInjected = ErrCrash

type faultHooks func(FaultPoint) error

func (h faultHooks) at(p FaultPoint) error {
	if h == nil {
		return nil
	}
	return h(p)
}

// envFaults builds hooks from FaultEnv: at the chosen point the process
// sends itself SIGKILL, so nothing after it runs, exactly like a crash.
func envFaults() faultHooks {
	spec := os.Getenv(FaultEnv)
	if spec == "" {
		return nil
	}
	point, n := spec, 1
	if i := lastColon(spec); i >= 0 {
		point = spec[:i]
		fmt.Sscanf(spec[i+1:], "%d", &n)
	}
	seen := 0
	return func(p FaultPoint) error {
		if string(p) != point {
			return nil
		}
		seen++
		if seen >= n {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL cannot be caught; wait for it to land
		}
		return nil
	}
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}
