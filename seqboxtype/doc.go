// Package seqboxtype declares the data types seqbox's packages share: the
// CloudEvent envelope and its parser (Event, ParseEvent, InvalidEventError),
// a message's Identity, the Outcome a delivery ends in and the Result that
// records it, and the states seqbox writes to its tables (Park, DeadLetter,
// Request, Effect).
//
// It is a leaf, as river's rivertype is: it imports nothing of seqbox, so a
// transport's publisher can parse an event, and a store can write an
// outcome, without the consumer or a database driver. The root package
// seqbox declares the consumer and what a program configures (Config,
// Handler, Tx, the policies) and uses these types under their one name.
package seqboxtype
