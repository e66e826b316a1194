// Package outbox publishes the events a handler emits, after its
// transaction commits. A handler calls Emit with its transaction: the
// event is a row written with the business effect and the inbox identity,
// so it exists if and only if they committed. A Relay then publishes the
// rows to a transport, at least once, and marks them published.
//
// A crash between publishing and marking publishes the event again with
// the same id; the downstream consumer's inbox recognises it as a
// duplicate. Each partition key's events are published in the order they
// were emitted. An event the publisher refuses is recorded (attempts, last
// error), logged with its id and key, counted (Relay.Stats, Collector) and
// tried again after a backoff that doubles up to Config.MaxBackoff; until
// it is published, its key's later events wait behind it, while the relay
// reads and publishes the other keys past them (Relay.Refusals lists the
// keys held up). One relay runs at a time per name: relays elect a leader
// through a lease row, so a standby takes over when the active one dies.
package outbox
