package seqbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/seqbox/seqbox/seqboxtype"
)

// identityKey keys the message's seqboxtype.Identity in a Decider's or
// Handler's context.
type identityKey struct{}

// decisionKey keys the recorded decision ([]byte) in a Handler's context.
type decisionKey struct{}

// resultRefKey keys the *string a Handler's SetResultReference fills.
type resultRefKey struct{}

// ErrNotInHandler is SetResultReference's answer outside a Handler's
// context (a Decider's, a BatchHandler's, or any other).
var ErrNotInHandler = errors.New("seqbox: not a Handler's context: a result reference belongs to the one event a Handler applies")

// SetResultReference names what the Handler's effect produced for the
// event it is applying (the id of the task it created, of the row it
// wrote): the inbox keeps it with the identity when the event applies
// (InboxRow.ResultReference, `seqbox inbox show`), so that a later copy's
// duplicate points at what the first one made. The last call wins; a
// delivery that fails keeps none of it. ref is at most
// seqboxtype.MaxAttributeSize bytes of UTF-8 text with no control
// character; an unfit one is an error the Handler returns (the delivery
// then fails as for any error).
func SetResultReference(ctx context.Context, ref string) error {
	if err := checkResultReference(ref); err != nil {
		return err
	}
	dst, ok := ctx.Value(resultRefKey{}).(*string)
	if !ok {
		return ErrNotInHandler
	}
	*dst = ref
	return nil
}

// checkResultReference refuses a reference the inbox cannot keep and show
// as given.
func checkResultReference(ref string) error {
	switch {
	case len(ref) > seqboxtype.MaxAttributeSize:
		return fmt.Errorf("seqbox: result reference of %d bytes: the limit is %d", len(ref), seqboxtype.MaxAttributeSize)
	case !utf8.ValidString(ref):
		return fmt.Errorf("seqbox: result reference %q is not valid UTF-8", ref)
	case strings.ContainsFunc(ref, unicode.IsControl):
		return fmt.Errorf("seqbox: result reference %q holds a control character", ref)
	}
	return nil
}

// withResultRef gives a Handler's context the place SetResultReference
// fills.
func withResultRef(ctx context.Context, dst *string) context.Context {
	return context.WithValue(ctx, resultRefKey{}, dst)
}

// withIdentity puts the message's identity into ctx (seqbox.IdentityFrom),
// with its business deadline (zero: none).
func withIdentity(ctx context.Context, consumer string, ev seqboxtype.Event, inTx bool, deadline time.Time) context.Context {
	return context.WithValue(ctx, identityKey{}, seqboxtype.Identity{Consumer: consumer, Source: ev.Source, ID: ev.ID, InTransaction: inTx,
		Deadline: deadline})
}

// withDecision puts a recorded decision into ctx (seqbox.DecisionFrom).
func withDecisionValue(ctx context.Context, d []byte) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// IdentityFrom returns the identity of the message the context belongs
// to, when it is a Decider's or a Handler's context.
func IdentityFrom(ctx context.Context) (seqboxtype.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(seqboxtype.Identity)
	return id, ok
}
