// Package fault injects crashes at the pipeline's failure windows, for the
// chaos harness and the tests of the pipeline's failure windows. It is not
// part of seqbox's API: a binary built on the library can only be made to
// crash where seqbox's own code passes a hook to a Consumer or a Relay
// (own.Options.Hook), as the seqbox binary's chaos worker does with
// FromEnv.
package fault

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Point names a place in the pipeline where a crash can be injected.
type Point string

// The failure windows of the pipeline, in pipeline order.
const (
	BeforeTx          Point = "before_tx"
	AfterInboxInsert  Point = "after_inbox_insert"
	AfterHandler      Point = "after_handler"
	BeforeCommit      Point = "before_commit"
	AfterCommit       Point = "after_commit_before_ack"
	MidBatch          Point = "mid_batch"
	DuringLeaseExtend Point = "during_lease_extend"
	DuringRedrive     Point = "during_redrive"
	DuringPurge       Point = "during_purge"
)

// The failure windows of the agent path (docs/design.md §10): a decision's claim is
// taken; the effect ledger's pending row is committed and the agent not
// yet called; the agent answered and nothing is committed yet.
const (
	AfterDecisionClaim Point = "after_decision_claim"
	AfterLedgerPending Point = "after_ledger_pending"
	AfterAgentAnswer   Point = "after_agent_answer"
)

// The failure windows of the outbox relay (docs/design.md §12): an event
// is published and not yet marked; a round's events are marked published.
const (
	RelayAfterPublish Point = "relay_after_publish"
	RelayAfterMark    Point = "relay_after_mark"
)

// Env names the environment variable the chaos worker reads: a consumer
// process kills itself with SIGKILL at a fault point,
// SEQBOX_FAULT=after_commit_before_ack at the first time that point is
// reached, SEQBOX_FAULT=point:N at the Nth.
const Env = "SEQBOX_FAULT"

// ErrCrash is what a Hook returns (or wraps) to simulate a crash at a
// fault point: the batch is abandoned with nothing acked, its transaction
// rolled back as a dying process's would be, and Run returns.
var ErrCrash = errors.New("seqbox: injected crash")

// IsCrash reports whether err is an injected crash.
func IsCrash(err error) bool { return errors.Is(err, ErrCrash) }

// Hook is called at every Point; a non-nil error crashes there.
type Hook func(Point) error

// At calls the hook at p; a nil Hook never crashes.
func (h Hook) At(p Point) error {
	if h == nil {
		return nil
	}
	return h(p)
}

// FromEnv builds the hook Env describes, or nil when it is unset: at the
// chosen point the process sends itself SIGKILL, so nothing after it runs,
// exactly like a crash.
func FromEnv() (Hook, error) {
	spec := os.Getenv(Env)
	if spec == "" {
		return nil, nil
	}
	point, n := spec, 1
	if i := strings.LastIndexByte(spec, ':'); i >= 0 {
		point = spec[:i]
		if _, err := fmt.Sscanf(spec[i+1:], "%d", &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: the count after ':' must be a positive integer", Env, spec)
		}
	}
	seen := 0
	return func(p Point) error {
		if string(p) != point {
			return nil
		}
		seen++
		if seen >= n {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL cannot be caught; wait for it to land
		}
		return nil
	}, nil
}
