package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
)

// MaxUncertain bounds the uncertain calls of one consumer that
// ResolveEffect looks through for the key it is given: uncertain calls
// are the exception (a call whose answer was lost), never a backlog.
const MaxUncertain = 100_000

// BadResolutionError says what is wrong with a Resolution, before
// anything is looked up.
type BadResolutionError struct{ Problem string }

func (e *BadResolutionError) Error() string { return e.Problem }

// Resolution is how an operator settles an uncertain external call, after
// checking the remote side: succeeded with the remote side's reference, or
// failed (the next attempt calls again); who and why are kept.
type Resolution struct {
	State  effects.State `json:"state"`
	Ref    string        `json:"ref,omitempty"`
	By     string        `json:"by"`
	Reason string        `json:"reason"`
}

// Check says what is wrong with r, if anything (a *BadResolutionError),
// naming the CLI's flags, which are the API's fields.
func (r Resolution) Check() error {
	switch {
	case r.State != effects.Succeeded && r.State != effects.Failed:
		return &BadResolutionError{fmt.Sprintf("--state %q: succeeded or failed", r.State)}
	case r.State == effects.Succeeded && strings.TrimSpace(r.Ref) == "":
		return &BadResolutionError{"--state succeeded needs --ref, the remote side's reference of the effect"}
	case strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Reason) == "":
		return &BadResolutionError{"--by and --reason are required: the resolution must be attributable"}
	}
	return nil
}

// ResolveEffect settles consumer's uncertain call with idempotency key
// key as r says. A key that is not an uncertain call of consumer is
// store.ErrNotFound: another consumer's calls are not this one's to
// settle.
func ResolveEffect(ctx context.Context, l *effects.Ledger, consumer, key string, r Resolution) error {
	if err := r.Check(); err != nil {
		return err
	}
	rows, err := l.List(ctx, effects.Filter{Consumer: consumer, State: effects.Uncertain, Limit: MaxUncertain})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(rows, func(e effects.Effect) bool { return e.IdempotencyKey == key }) {
		return fmt.Errorf("consumer %q has no uncertain call with idempotency key %q (seqbox effects list --state uncertain lists them): %w",
			consumer, key, store.ErrNotFound)
	}
	return l.Resolve(ctx, key, r.State, r.Ref, r.By, r.Reason)
}
