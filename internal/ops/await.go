package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ErrNotTaken: no consumer took the request within the wait; it was
// cancelled, so it cannot run unexpectedly later, and nothing changed.
var ErrNotTaken = errors.New("no consumer took the request; it is cancelled, nothing changed")

// StillRunningError: a consumer took the request but has no result yet.
type StillRunningError struct {
	Request store.OperatorRequest
	Wait    time.Duration
}

func (e *StillRunningError) Error() string {
	r := e.Request
	head := fmt.Sprintf("request %d was taken by %s at %s and has no result after %s", r.Seq, r.TakenBy, r.TakenAt.Format(time.RFC3339), e.Wait)
	alive := r.AliveAt
	if alive.IsZero() {
		return head + "; it may still finish" // taken by a seqbox that kept no sign of life
	}
	if silent := time.Since(alive); silent > seqbox.LiveWithin {
		return fmt.Sprintf("%s; its taker has shown no sign of life since %s (%s): a consumer of %q that looks for requests fails it "+
			"(one running, or the next to start), and then it may be run again", head, alive.Format(time.RFC3339), silent.Round(time.Second), r.Consumer)
	}
	return fmt.Sprintf("%s; its taker was alive at %s: it may still finish", head, alive.Format(time.RFC3339))
}

// AwaitRequest polls request seq every poll until a consumer has executed
// it, and returns it done or failed. When nobody takes it within wait it
// is cancelled and the error matches ErrNotTaken; when it is taken but
// has no result after wait, the error is a *StillRunningError.
func AwaitRequest(ctx context.Context, ctl store.Executor, seq int64, wait, poll time.Duration) (store.OperatorRequest, error) {
	deadline := time.Now().Add(wait)
	for {
		r, err := ctl.RequestGet(ctx, seq)
		if err != nil {
			return r, err
		}
		switch r.State {
		case seqboxtype.RequestDone, seqboxtype.RequestFailed:
			return r, nil
		case seqboxtype.RequestRunning:
			if time.Now().After(deadline) {
				return r, &StillRunningError{Request: r, Wait: wait}
			}
		case seqboxtype.RequestPending:
			if time.Now().After(deadline) {
				cancelled, err := ctl.RequestCancel(context.WithoutCancel(ctx), store.RequestCancelParams{Seq: seq, Why: fmt.Sprintf("no live consumer took it within %s", wait), At: time.Now()})
				if err != nil {
					return r, err
				}
				if cancelled {
					return r, fmt.Errorf("request %d, after %s: %w", seq, wait, ErrNotTaken)
				}
				deadline = time.Now().Add(wait) // taken at the last moment: wait for its result
			}
		default:
			return r, fmt.Errorf("request %d is %s: %s", seq, r.State, r.Error)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(poll):
		}
	}
}
