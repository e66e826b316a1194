// Package kafka is seqbox's Kafka transport (franz-go): a member of a
// consumer group that hands records to a seqbox Consumer and commits
// their offsets only after the database COMMIT, and a Publisher that keys
// each record by the event's partitionkey.
//
// # What Kafka's own dedupe and ordering cover
//
// Order: the Publisher sets the record key to the event's partitionkey
// (its id when it has none), so Kafka's default partitioner puts every
// event of a key on one partition, and a partition is read in offset
// order by one member at a time. The producer is idempotent (acks=all),
// so its own retries neither duplicate nor reorder a partition's records.
//
// Dedupe: that is all. Kafka has no message-level dedupe id (the identity
// travels in the ce-id and ce-source headers, for inspection only): a
// producer that republishes after a timeout or a crash writes a second
// record, and a consumer group redelivers everything after the last
// committed offset whenever a member dies, leaves, or a rebalance moves a
// partition. Exactly-once in Kafka (transactions, read_committed) covers
// Kafka-to-Kafka pipelines, not a write to your database.
//
// # What they do not cover, and why the inbox and the gate are needed
//
//   - Redelivery. Offsets are per partition, not per message: the
//     committed offset is the contiguous prefix of acknowledged records
//     (an acknowledgement out of order waits for the records before it).
//     Whatever was applied after that prefix comes back after a rebalance
//     or a failed commit; the inbox turns every copy into a duplicate.
//   - Producer duplicates under new offsets, which no consumer-side
//     offset can catch; the inbox does, by (source, id).
//   - Order across nacks. Kafka cannot nack one record: this transport
//     holds a nacked record in the member and hands it out again after
//     the delay, never committing past it, while the partition's later
//     records keep flowing. Per-key order therefore holds until a nack;
//     the version gate holds the successors until the retried version is
//     applied. Order across producers, partition-count changes and topic
//     migrations is not Kafka's either: the gate orders by objectversion.
//   - Delivery counts. Kafka keeps none. This transport writes one into
//     the offset-commit metadata ("seqbox1 head=O n=N through=H": the
//     record at the committed offset O was handed out N times, and records
//     before H were handed out at least once), before it hands records
//     out (Receive withholds them while that write fails). Attempt is then
//     exact within a member, exact across members for the record at the
//     committed offset (so a record that kills every member that takes it
//     counts up, and seqbox's crash-loop guard can dead-letter it), and at
//     least 2 for any other record an earlier member handed out. seqbox's
//     retry and DLQ decision does not depend on it: the consumer counts a
//     message's handler failures in its own store (Retry.MaxAttempts).
//
// # Leases and rebalances
//
// A partition is owned by one member until a rebalance; there is no
// per-message lease or visibility timeout. Extend is therefore a no-op
// that returns nil while the partition is assigned and ErrLeaseLost once
// it was revoked (transporttest.Features.SharedLease). Rebalancing is
// eager: every rebalance revokes every partition of every member before
// assigning any. On revoke the member commits its acknowledged prefix one
// last time, then every delivery it still holds has lost its lease: Ack,
// Nack and Extend report transport.ErrLeaseLost and commit nothing, and
// the partition's next owner reads from the committed offset. Commits
// carry the group generation, so a member fenced by a rebalance cannot
// commit. A failed commit is reported by Ack (ErrCommit); the
// acknowledgement stays in the member and goes out with the next commit.
//
// Close leaves the group and settles nothing that was not acknowledged.
// A long handler (a model call) keeps its partition as long as the member
// heartbeats; it cannot be taken away by a timeout, only by a rebalance
// (a member joining or leaving). When one happens mid-call, the record's
// new owner calls the handler again; seqbox applies only one result.
//
// # Configuration to use with seqbox
//
//   - One consumer group per seqbox consumer (Config.Group, same for
//     every process of it); topic partitions >= the processes you run.
//   - enable.auto.commit off (the transport commits; do not pass options
//     that turn autocommit on, or change balancers or rebalance callbacks).
//   - SessionTimeout is the redelivery bound after a crash (default 45s);
//     HeartbeatInterval bounds how fast a member notices a rebalance.
//     RebalanceTimeout can stay at Kafka's default: the transport never
//     holds a rebalance for a running handler (the revoked batch's
//     acknowledgements report ErrLeaseLost instead).
//   - seqbox ExtendEvery/ExtendBy: any value; Extend costs nothing here.
//   - Retry.MaxAttempts: Kafka has no max-deliveries of its own and no
//     broker DLQ; seqbox's MaxAttempts alone decides, and the DLQ is
//     seqbox's. Nack delays (Retry backoff) are honoured in the member;
//     a rebalance during the delay hands the record to the next owner at
//     once.
//   - Inbox Retention must exceed how far back a group can be rewound:
//     the topic's retention.ms when an operator may reset offsets to the
//     earliest, else the longest time a record may stay uncommitted.
//   - Producers: the Publisher (idempotent, acks=all, key=partitionkey).
//     Others must key by partitionkey with the default (murmur2)
//     partitioner and keep the structured-mode CloudEvent as the value.
//
// The in-process broker the tests and `seqbox chaos --transport kafka`
// use is franz-go's kfake (internal/broker/kafka); it implements the
// classic consumer-group protocol, offset commits with metadata and
// read_committed, without replication, quotas or rack awareness.
package kafka
