// Package seqboxtype declares seqbox's public types: the CloudEvent
// envelope and its parser (Event, ParseEvent), a consumer's Config and
// policies, the handler-facing types (Tx, Handler, BatchHandler, Decider,
// Result, Identity), Permanent and Settle, and the Prometheus Metrics.
//
// The root package seqbox names every one of them (seqbox.Event is
// seqboxtype.Event) and holds the Consumer; programs import seqbox. The
// types live here, in a leaf that imports neither seqbox nor its engine, so
// that the API and the engine (internal/engine) share them, as river's
// rivertype does.
package seqboxtype
