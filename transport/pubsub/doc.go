// Package pubsub is seqbox's Google Cloud Pub/Sub transport
// (cloud.google.com/go/pubsub/v2): a Publisher that puts structured-mode
// CloudEvents on a topic with the partitionkey as ordering key, and a
// Transport that pulls them from a subscription for a seqbox.Consumer.
//
// # How it maps
//
//   - Ordering key = the event's partitionkey (none when the event has
//     none). The Publisher enables message ordering; Setup creates the
//     subscription with enable_message_ordering.
//   - Identity: Pub/Sub assigns its own message IDs and has no
//     publish-side dedupe. The identity travels in attributes (ce-id,
//     ce-source, ce-type, ce-specversion, seqbox-partition-key,
//     seqbox-object-version); the body is the CloudEvent unchanged.
//   - Receive = the unary Pull RPC, up to Config.Wait; Ack = Acknowledge
//     (AckBatch: one call per 1,000 ack IDs); Extend(d) =
//     ModifyAckDeadline(d); Nack(delay) = ModifyAckDeadline(delay), 0 for
//     at once. Both round up to whole seconds and cap at 600 s, Pub/Sub's
//     longest deadline: a longer Nack delay comes back after 600 s.
//   - Attempt = Pub/Sub's delivery_attempt, which it fills in only when the
//     subscription has a dead-letter policy (Setup always sets one).
//     Without one, a member counts its own deliveries of a message, and a
//     redelivery to another member reports 1 again: declare
//     transporttest.Features.NoAttemptCount for such a subscription.
//   - Close abandons a Pull in flight and settles nothing: what the member
//     held comes back to another member when its ack deadline expires.
//   - ErrLeaseLost: only with exactly-once delivery does Pub/Sub say that
//     an acknowledgement came too late (PERMANENT_FAILURE_INVALID_ACK_ID);
//     Ack and AckBatch then return an error matching
//     transport.ErrLeaseLost. Without it a late Ack or Extend is dropped
//     silently, and the message comes back; the inbox makes that harmless.
//
// The pull RPCs are used rather than the library's callback Subscriber
// because the callback side manages leases itself (it extends them up to
// MaxExtension whatever seqbox decides, and nacks what is in flight when
// it stops), and its Ack is fire-and-forget: AckBatch could neither wait
// for the acknowledgement after the database COMMIT nor report a lost
// lease. The cost is a round trip per batch instead of a stream.
//
// # What Pub/Sub covers, and what it does not
//
// Ordering keys deliver each key's messages in the order Pub/Sub received
// them, from publishers in one region. They do not cover: the order in
// which the source produced them (two producers, or a retry after a
// publish error, can publish version 3 after version 4); redelivery, which
// for an ordered key resends the message and every later one of the key,
// acknowledged or not; and messages without an ordering key. seqbox's
// version gate orders by objectversion whatever the arrival order, holds
// a successor until its predecessor is applied, and drops a stale one.
//
// Pub/Sub delivers at least once. Nothing dedupes publishes (a publish
// retried after a timeout is stored twice, under two message IDs), and
// without exactly-once delivery an expired ack deadline, a nack or a
// crash redelivers. Exactly-once delivery covers only redelivery within
// one subscription while the ack deadline holds; it does not dedupe
// publishes and does not make the handler's database write and the
// acknowledgement atomic. seqbox's inbox does: the identity (source, id)
// is written in the handler's transaction, and the acknowledgement goes
// out only after COMMIT.
//
// # Configuration to use with seqbox
//
//   - Subscription: enable_message_ordering on; a dead-letter policy
//     (Config.MaxDeliveryAttempts, default 25) with a dead-letter topic
//     that has a subscription of its own; no retry policy (seqbox's
//     Retry backoff, sent as Nack's delay, is the only one; Pub/Sub's
//     would be added on top); exactly-once delivery optional. Setup
//     creates exactly that. On Google Cloud the Pub/Sub service agent
//     needs roles/pubsub.publisher on the dead-letter topic and
//     roles/pubsub.subscriber on the subscription.
//   - Dead letters: keep seqbox's Retry.MaxAttempts below the
//     subscription's max_delivery_attempts (Config.RetryMaxAttempts
//     states it; Open refuses a subscription that breaks the rule).
//     seqbox then dead-letters first, into its own DLQ, with the original
//     envelope, the identity and the error history, and blocks or
//     releases the key per OnDeadLetter; the message is then acknowledged
//     and Pub/Sub never forwards it. Pub/Sub's dead-letter topic is the
//     backstop for messages no consumer settles (each attempt crashes its
//     process). Keep max_delivery_attempts above 4 x Retry.MaxAttempts as
//     well, so that seqbox's crash-loop guard acts first; Pub/Sub allows
//     5 to 100, so Retry.MaxAttempts at most 24.
//   - Leases: ack deadline (Config.AckDeadline, 10 s to 600 s; default
//     60 s) larger than the consumer's ExtendEvery (default 10 s) with
//     room for a slow round trip, say at least twice; ExtendBy (default
//     30 s) at most 600 s. A handler longer than the ack deadline is then
//     extended, not redelivered.
//   - Publishing: an ordering key paused by a failed publish is resumed
//     and the error returned; publish the failed event again before the
//     key's next ones.
//
// # The pstest fake
//
// Tests run against pstest (internal/broker/pubsub starts it on loopback,
// where other processes reach it, as the chaos harness needs). What it
// does not emulate, checked against its source (v2.9.0) and pinned by the
// probes in internal/broker/pubsub:
//
//   - Ordered delivery: it leases only the oldest unacknowledged message
//     of a key and nothing more of that key until it is acknowledged (a
//     nacked head comes back first). It does not redeliver a key's later,
//     already acknowledged messages after a redelivery, as Pub/Sub does.
//     Order between messages of a key rests on their publish timestamps.
//   - Dead letters: max_delivery_attempts is not checked against 5..100,
//     the forwarded message gets none of the CloudPubSubDeadLetterSource*
//     attributes, and no IAM is involved.
//   - delivery_attempt counts a message's deliveries over every
//     subscription of the topic, not per subscription.
//   - Exactly-once delivery: the flag is stored and echoed, nothing else.
//     A stale ack ID is accepted silently and settles nothing; no
//     PERMANENT_FAILURE_INVALID_ACK_ID or TRANSIENT_* answer is ever
//     given (the lease-lost test injects Pub/Sub's answer with a pstest
//     reactor).
//   - Retry policy: stored, not applied; a nack comes back at once.
//   - Ack deadlines: any subscription deadline from 0 s is accepted (the
//     tests use 2 s; Pub/Sub's minimum is 10 s); an expired deadline
//     makes the message available at the next pull, and a
//     ModifyAckDeadline on an expired but not yet redelivered ack ID
//     still extends it.
//   - Retention: 10 minutes after its publication, a message is dropped
//     as soon as it is not leased, delivered or not (Pub/Sub keeps
//     unacknowledged messages 7 days by default).
//   - Pull waits at most 500 ms for a message; publish-side limits (1 MB/s
//     per ordering key, message and attribute sizes), snapshots and
//     regions are not modelled.
package pubsub
