// Package own is the engine's one internal surface: what seqbox's own
// packages (the CLI, the gateway, outbox, the labs and the suites) give a
// Consumer or an outbox Relay, or take from a handler's context, and an
// application cannot.
//
//   - Wrap puts Options on the store.Store given to seqbox.NewConsumer or
//     outbox.NewRelay: a crash hook at the fault points (internal/fault)
//     and the built-in record handler's kind. NewConsumer and NewRelay take
//     them off first (Unwrap), in one place each.
//   - WithTx and Tx carry the batch's store transaction in a handler's
//     context, for seqbox's own writes in it: outbox.Emit and the gateway's
//     envelopes.
package own

import (
	"context"
	"errors"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
)

// Options are what seqbox's own packages set on a Consumer or a Relay.
type Options struct {
	// Hook is called at every fault point; a non-nil error crashes there
	// (fault.ErrCrash). Nil never crashes.
	Hook fault.Hook
	// Record marks a consumer whose handler is the built-in record handler
	// (internal/replay): it registers with the handler kind
	// store.HandlerRecord, so that the CLI may drive it in-process
	// (docs/design.md §9), and a message that fails transiently while it
	// is unparked or redriven is retried at once instead of after its
	// backoff, as replay does. A Relay ignores it.
	Record bool
}

// wrapped is a store carrying Options.
type wrapped struct {
	store.Store
	opt Options
}

// Wrap returns st carrying o, added to what st carries already (a Hook
// replaces one, Record stays set). A nil st stays nil, for the Consumer to
// refuse.
func Wrap(st store.Store, o Options) store.Store {
	if st == nil {
		return nil
	}
	inner, had := Unwrap(st)
	if o.Hook == nil {
		o.Hook = had.Hook
	}
	o.Record = o.Record || had.Record
	return wrapped{Store: inner, opt: o}
}

// Unwrap returns the store st wraps and the Options it carries: st itself
// and none when Wrap did not make it.
func Unwrap(st store.Store) (store.Store, Options) {
	if w, ok := st.(wrapped); ok {
		return w.Store, w.opt
	}
	return st, Options{}
}

// txKey keys the batch's store.ExecutorTx in a Handler's context.
type txKey struct{}

// ErrNoTx is returned by Tx's callers when ctx carries no seqbox
// transaction.
var ErrNoTx = errors.New("the context carries no seqbox transaction: call it from a Handler (or BatchHandler) with the ctx the Handler was given")

// WithTx returns ctx carrying tx, the driver inside the transaction the
// handler writes in.
func WithTx(ctx context.Context, tx store.ExecutorTx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// Tx returns the store transaction ctx carries, or ErrNoTx.
func Tx(ctx context.Context) (store.ExecutorTx, error) {
	if tx, ok := ctx.Value(txKey{}).(store.ExecutorTx); ok && tx != nil {
		return tx, nil
	}
	return nil, ErrNoTx
}
