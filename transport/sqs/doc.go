// Package sqs is seqbox's transport for Amazon SQS FIFO queues
// (aws-sdk-go-v2/service/sqs): a Transport that receives, and a Publisher
// that sends structured-mode CloudEvents.
//
// # How seqbox maps onto SQS
//
//   - Publish: the body is the CloudEvent unchanged. MessageGroupId is the
//     event's partitionkey (its id when it has none), kept as is when SQS
//     accepts it (1 to 128 printable ASCII characters) and replaced by
//     "sha256-" and its hex hash otherwise, so one key is always one group.
//     MessageDeduplicationId is the hex SHA-256 of the identity (source and
//     id) and the payload hash: 64 characters. A retried send is dropped;
//     the same id with another payload (a collision) is stored, so the
//     inbox records it instead of SQS hiding it. Message attributes ce-id, ce-source, ce-type,
//     seqbox-partition-key and seqbox-object-version (a Number) carry what
//     a filter or a router needs without parsing the body. An invalid
//     event is refused with seqboxtype.ParseEvent's error and nothing is sent.
//   - Receive: ReceiveMessage, at most ten per call, long-polling
//     Config.WaitTime (default 1 s) when the queue is empty; a batch larger
//     than ten is filled with further calls only while each returns a full
//     page. Attempt is ApproximateReceiveCount.
//   - Ack: DeleteMessage; the consumer's batch ack (BatchAcker) uses
//     DeleteMessageBatch, ten entries per call.
//   - Nack(delay): ChangeMessageVisibility to delay, rounded up to whole
//     seconds (0 makes the message visible at once) and clamped to SQS's
//     12 hours. In a FIFO queue the message's group waits behind it for
//     the delay: the key's successors are held, as seqbox's gate would
//     hold them anyway.
//   - Extend(d): ChangeMessageVisibility to d from now, rounded up and
//     clamped the same way. SQS also refuses a total visibility past 12
//     hours from the receive; such an Extend returns the error.
//   - A receipt handle that SQS no longer accepts (ReceiptHandleIsInvalid,
//     MessageNotInflight, "The receipt handle has expired") makes Ack,
//     Nack, Extend and AckBatch report transport.ErrLeaseLost: the
//     visibility timeout ran out and the message may be with another
//     member. The inbox makes that harmless.
//   - Close ends receives in flight and leaves deliveries as they are:
//     unless settled, they come back after their visibility timeout.
//
// # What SQS FIFO covers
//
// Deduplication: a second send with the same MessageDeduplicationId within
// five minutes is accepted and dropped, so a producer that retries a send
// does not enqueue the event twice. Ordering: messages of one group are
// delivered in the order they were sent, and while one of them is in
// flight (received, not deleted, visibility not expired) no later message
// of the group is delivered. Groups are independent, so keys are consumed
// in parallel.
//
// # What it does not cover, and why the inbox and the gate stay
//
//   - The dedupe window is five minutes. An event sent again later (an
//     outbox relay that restarts, a replay, a DLQ redrive, a producer that
//     retries after a long outage) is a new message. With
//     DeduplicationScope=messageGroup the id is unique per group only: the
//     same identity sent under another partition key is not caught.
//   - Deduplication is at send time only. Delivery is at least once: a
//     handler that outlives its visibility timeout, a DeleteMessage lost
//     after the database COMMIT, or a consumer killed between COMMIT and
//     delete all deliver the message again. The inbox recognises the
//     identity and applies nothing twice.
//   - Group order is send order, not version order. Two producers, a send
//     retried after a later one succeeded, or an event redriven from a DLQ
//     arrive out of objectversion order; the version gate holds or drops
//     them by version.
//   - A standard (non-FIFO) queue has neither: the Publisher then sends no
//     group or deduplication id, and seqbox alone provides both.
//
// # Configuration to use with seqbox
//
//   - A FIFO queue; content-based deduplication off (the Publisher sets
//     the id). For throughput, DeduplicationScope=messageGroup with
//     FifoThroughputLimit=perMessageGroupId.
//   - VisibilityTimeout is the lease (Transport.Lease reads it at Open):
//     long enough for a normal batch, 30 s or more. Set the consumer's
//     ExtendEvery to at most a third of it and ExtendBy to it, so a long
//     handler (a model call) keeps its message.
//   - A redrive policy, if any, with maxReceiveCount of at least
//     MinMaxReceiveCount(Retry.MaxAttempts), that is 4×MaxAttempts+1: seqbox
//     dead-letters a failing message after MaxAttempts failures, or after
//     4×MaxAttempts deliveries that never settled (a crash loop), into its
//     own DLQ with identity, attempts and errors. A lower maxReceiveCount
//     lets SQS move the message to its dead-letter queue first, outside
//     seqbox's view. Set Config.MaxAttempts and Open refuses such a queue.
//   - ReceiveMessageWaitTimeSeconds on the queue does not matter:
//     Config.WaitTime is sent with every receive.
//
// # goaws, the emulator in the tests
//
// The tests run github.com/Admiral-Piett/goaws v0.4.5 in process on
// loopback (internal/broker/sqs, whose probe tests check each point
// below). Compared with real SQS, goaws:
//
//   - speaks only the AWS Query protocol; the SDK's default JSON protocol
//     gets 400 Bad Request, so its client is built with the smithy-go
//     awsquery protocol;
//   - does not hold a FIFO group while a message of it is in flight: it
//     remembers one locked group per queue, each lock replacing the last,
//     so interleaved groups have several messages in flight at once; a
//     message it skips for a locked group is marked in flight without
//     being delivered and stays invisible for a whole visibility timeout;
//     and ChangeMessageVisibility to 0 does not release the group. The
//     test server therefore gives each message a group of its own
//     (internal/broker/sqs Options.KeepGroups): FIFO without group order,
//     declared to the conformance suite as NoPerKeyOrder. Real SQS FIFO
//     keeps per-key order;
//   - never counts receives: ApproximateReceiveCount is always 1
//     (declared NoAttemptCount), which also leaves seqbox's crash-loop
//     guard, which counts deliveries, without effect;
//   - deduplicates only while the first message is still in the queue:
//     deleting it forgets its deduplication id (real SQS keeps it five
//     minutes), and it expires ids only while the queue holds messages;
//   - counts a message's returns to visibility (including the skipped,
//     undelivered ones above) for its redrive policy, and moves it after
//     maxReceiveCount+1 receives, one more than SQS;
//   - lists a DeleteMessageBatch entry with a stale receipt handle neither
//     under Successful nor under Failed (the transport then deletes that
//     entry alone to learn why), and answers a DeleteMessage with a stale
//     handle with code AWS.SimpleQueueService.QueueExists;
//   - ignores ReceiveMessage's VisibilityTimeout and attribute-name
//     filters, content-based deduplication, DeduplicationScope, queue
//     tags and policies, and validates neither MessageGroupId nor
//     MessageDeduplicationId; counts visibility timeouts in whole seconds
//     and expires them on a periodic tick;
//   - expires visibility timeouts and deduplication ids on a periodic tick
//     (1 s here) whose work grows with messages × deduplication ids per
//     queue, under a global lock: about 8,000 messages/s consumed and
//     5,000/s published with 2,000 queued on this machine
//     (BenchmarkThroughput, transport only), but a queue 5,000 deep
//     starves every request past a 30 s visibility timeout;
//   - keeps every queue in process memory, shared by every server in the
//     process, and loses it on exit.
package sqs
