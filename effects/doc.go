// Package effects is seqbox's ledger for external calls: email, a CRM
// API, a payment. The inbox transaction covers only the local database; a
// call to another system cannot roll back with it. The ledger makes such a
// call safe to attempt again after any crash:
//
//   - Each call has a row keyed by the message's identity and an action
//     name, with a deterministic idempotency key derived from (consumer,
//     source, id, action) that is passed to the remote side.
//   - The row is committed as pending, in its own short transaction,
//     before the call. After the call it becomes succeeded (with the
//     remote reference) or failed (the remote side said no, or certainly
//     never got it: Definite, NotApplied), or uncertain: a timeout, a
//     connection reset, or a crash after the request may have been sent
//     (a pending row found by the next attempt).
//   - An answer that comes after an operator resolved the call (its
//     caller was frozen, not dead) is refused: the resolution stands.
//   - An uncertain call is never executed again blindly. The next attempt
//     asks Config.Reconcile, a user-supplied check by idempotency key or
//     reference, first; without one it stays uncertain until an operator
//     resolves it (seqbox effects resolve).
//
// Call Do from a Decider (Config.Decide), which runs outside the inbox
// transaction, and return the reference as (part of) the decision; the
// Handler then writes the local effect from DecisionFrom. Do refuses to run
// inside the inbox transaction: on SQLite the open transaction holds the
// only writer, so the pending row could not commit first.
package effects
