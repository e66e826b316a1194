// Package seqbox is the reliability layer a message consumer puts in front
// of its side effects. At-least-once queues redeliver (a worker commits and
// dies before its ACK, a lease expires during a slow model call, an operator
// redrives the DLQ) and reorder (a late "address changed" v2 arrives after
// "cancelled" v3). seqbox turns both into known outcomes.
//
// # The transactional inbox
//
// Every delivery runs in one database transaction together with the
// handler's own writes:
//
//	BEGIN
//	  INSERT inbox (consumer, source, id, payload_hash, ...)  -- the primary key decides races
//	  claim (consumer, businesskey)                           -- same effect under a new id
//	  ordering gate on (consumer, partitionkey)               -- stale, gap, blocked key
//	  handler(ctx, tx, event)                                 -- your business writes
//	  advance the key version by compare-and-set
//	  unpark parked successors that are now next
//	COMMIT
//	ACK
//
// A redelivery finds the identity and ends as Duplicate; the same identity
// with a different payload hash is a Collision, parked for investigation.
//
// # Ordering per business object
//
// The CloudEvents partitionkey names the business object and objectversion
// its version. Keys run in parallel; within a key the version gate blocks
// stale versions, holds gaps durably for a bounded time (GapPolicy,
// HoldTimeout, HoldExpiry), and a poison message blocks only its own key
// (OnDeadLetter, MaxBlock) until an operator redrives or skips it.
//
// # Outcomes
//
// Every delivery ends in exactly one Outcome: applied, duplicate,
// collision, semantic_duplicate, stale, version_conflict, held, expired,
// blocked, retry, dead_lettered or rejected. The same names appear in the
// audit table, the metrics and the CLI.
//
// # Stores and transports
//
// The store (store/sqlite, the embedded default) holds the inbox; the
// transport (transport/embedded, a durable at-least-once queue in the same
// SQLite file) delivers. Consumer.Run wires them: batches of deliveries in
// one transaction, COMMIT, then ACK. A batch runs set-based first (no
// savepoints, its identities and keys read in a few multi-row statements);
// a handler failure reruns it with a savepoint per delivery. A
// BatchHandler writes a batch's effects in one call. Consumer.Deliver runs
// one message synchronously, for replay and HTTP ingest; DeliverTx runs it
// in the caller's transaction.
//
// # Call chain
//
// One message through Consumer.Run, in call order (file: functions):
//
//	receive.go      run, scheduler.take, runDeliveries
//	batch.go        commitAndSettle, runBatch, runBatchOnce: BEGIN
//	prefetch.go     parseAll, prefetch: keys locked, identities inserted, set-based
//	pipeline.go     deliver, process: locks, savepoint, inbox, turn, key lock
//	gate.go         gate: blocked, stale, waiting behind a retry, gap
//	apply.go        apply: business key, handler (tx.handle), advance, applied
//	decide_path.go  decided, only with Decide: the decision, or stop to decide
//	pipeline.go     closeSavepoint; unpark.go, unpark: parked successors now next
//	apply.go        applyDeferred; batchtx.go, finish: the deferred writes
//	batch.go        ackInTx (settle.go) with the queue in the store; COMMIT
//	settle.go       settle: ack or nack each delivery
//
// A message stopped to be decided is decided outside any transaction
// (decider.go), staged in key order (stager.go, decide_pipe.go) and runs
// commitAndSettle again with its decision.
//
// # Words
//
// Each word has one meaning; docs/design.md §2 is the glossary. A delivery
// is one receipt of a message; it ends in one outcome, recorded in a
// Result. A decision is only the agent's answer (Config.Decide). Ack and
// nack settle a delivery at the transport; a handler concludes one
// (Conclude). Park writes a delivery that cannot run now to the database: a
// hold waits for a missing version, a block stops a key behind a dead
// letter; unparking takes them back when they are next. Release lets a
// blocked key continue past what stopped it. Drain is only shutdown. A
// request is an operator action recorded for the consumer that owns the
// key.
//
// # Packages
//
// This package is the API and the consumer. The data types it shares with
// stores and transports (Event, Identity, Outcome, Result) are declared in
// the leaf seqboxtype, as river's rivertype; the database driver is store,
// with its implementations in store/sqlite and store/postgres.
package seqbox
