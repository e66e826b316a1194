// Package nats is seqbox's NATS JetStream transport: a Publisher that puts
// CloudEvents on a stream and a Transport that hands them to a seqbox
// Consumer from a durable pull consumer.
//
// # How seqbox maps onto JetStream
//
// Subjects. An event is published to <Subject>.<n>, n = FNV-1a-32 of its
// partitionkey (of its id when it has none) modulo Partitions (see
// Partition). The stream covers <Subject>.*. Every publisher of a stream
// must use the same Subject and Partitions; change Partitions only on an
// empty stream, since keys move to other subjects.
//
// Identity. Nats-Msg-Id is the event's identity and its payload hash,
// ["<source>","<id>","<hash>"] (see MsgID). The body is the structured-mode CloudEvent unchanged; the
// headers ce-id, ce-source, ce-type, seqbox-partition-key and
// seqbox-object-version repeat it for tooling (control characters and '%'
// percent-encoded).
//
// Consumer. Every member (Open) of one seqbox consumer pulls from one
// durable consumer (Durable) over <Subject>.*, with explicit acks:
//
//	Delivery.Ack      DoubleAck (waits for the server's confirmation);
//	                  AckBatch sends a batch's acks together
//	Delivery.Nack(d)  NakWithDelay(d), or Nak when d is 0
//	Delivery.Extend   InProgress: AckWait starts again, in full
//	Delivery.Attempt  the message's NumDelivered
//	Transport.Close   closes the connection and settles nothing; the
//	                  member's deliveries come back after AckWait
//
// # Order: what JetStream keeps and what the gate keeps
//
// A stream stores messages in the order they arrive. A producer that
// waits for each acknowledgement (Publish) therefore stores a key's
// versions in the order it published them, and the durable consumer hands
// out messages not delivered before in stream order. So one member sees
// each key's first deliveries in publication order; that is the order the
// conformance suite checks, and Features claims it.
//
// That is all the broker keeps. This package uses one durable consumer for
// all partition subjects, shared by every member, and not one durable per
// partition with MaxAckPending 1: that would give strict per-partition
// order, but one message in flight per partition leaves nothing to batch
// (seqbox commits hundreds of messages in one transaction), a nack's
// backoff would stall every key of the partition, and the conformance
// suite requires a member to hold many unsettled deliveries of one key.
// Pinning each partition's consumer to one member (priority groups) keeps
// order across members only until ownership moves, and moves it only when
// the owner goes idle, which spreads no load. So, with one durable:
//
//   - With several members, one key's consecutive messages can be with
//     two members at once. seqbox's version gate holds the later one until
//     the earlier one commits; nothing is applied out of order.
//   - A redelivery (a nack, an AckWait that ran out, a member that died)
//     goes before every message not delivered yet, but after the key's
//     successors already delivered: the gate again holds those.
//   - Stream order is arrival order. Producers in several processes, or a
//     producer retrying a failed publication after publishing its
//     successors, store a key's versions out of version order; the gate
//     orders by objectversion, not by arrival.
//
// # Deduplication: what JetStream drops and what the inbox drops
//
// Within DuplicateWindow (default 2 minutes) the stream acknowledges and
// drops a publication whose Nats-Msg-Id it has stored: a producer retry is
// stored once. This is a first layer only. It does not cover
//
//   - redeliveries to consumers: a member that commits and dies before its
//     ack, an AckWait that runs out during a long model call, a lost ack;
//     JetStream delivers at least once;
//   - a publication after the window, or of the same fact by another path;
//   - the same effect asked for under a new id (seqbox's businesskey);
//   - a different payload under a stored identity: a collision, not a
//     retry. The payload hash in Nats-Msg-Id makes the stream store it,
//     so the consumer's inbox records the collision and parks it for an
//     operator instead of the broker dropping it silently.
//
// JetStream settles an ack that arrives after its AckWait ran out (the
// message may meanwhile be with another member), so the broker never says
// a lease was lost and no delivery reports transport.ErrLeaseLost; the
// inbox makes the second delivery a recorded duplicate.
//
// # Configuration to use with seqbox
//
//   - AckWait is the lease. InProgress restarts the whole AckWait whatever
//     duration seqbox asks for, so seqbox's ExtendBy does not matter; its
//     ExtendEvery must be well below AckWait (a third or less). Defaults:
//     AckWait 30s, ExtendEvery 10s.
//   - MaxDeliver: leave it at -1 (no limit; the default). seqbox counts a
//     message's failures in its store and dead-letters it after
//     Retry.MaxAttempts of them, or on delivery 4 × MaxAttempts + 1 if every
//     delivery crashed its process; JetStream's count also grows with
//     redeliveries that were not the message's fault. A message that
//     reaches JetStream's MaxDeliver is given up by the consumer, which
//     moves past it and only publishes an advisory
//     ($JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES): it stays in the stream
//     but never reaches seqbox's DLQ. A positive
//     MaxDeliver must be at least MaxDeliverFor(Retry.MaxAttempts); set
//     MaxAttempts in Config so Open can check it. Do not give the consumer a
//     BackOff: seqbox nacks with its own Retry backoff.
//   - MaxAckPending bounds what all members hold together; a seqbox
//     consumer holds up to 2 × Workers × BatchSize. Default 10000.
//   - DuplicateWindow: at least as long as a producer keeps retrying.
//   - MaxAge (default 14 days): seqbox's RedeliveryWindow must cover it, so
//     the inbox remembers every identity the stream can still deliver. A
//     new Durable starts at the stream's first message.
//   - Retention is limits-based: a work-queue stream would refuse a second
//     seqbox consumer (another Durable) on the same subjects, and an
//     interest stream drops what is published before a consumer exists.
//   - In a cluster: Replicas 3 (the consumer inherits it) and a URL listing
//     the members, so clients fail over.
//
// An existing stream is used as it is (it must cover <Subject>.*); only a
// missing one is created with Replicas, Storage, DuplicateWindow and
// MaxAge. The durable consumer is created or updated by every Open.
package nats
