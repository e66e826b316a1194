// Package serve is the machinery behind `seqbox serve`: an HTTP gateway
// that puts seqbox's whole pipeline in front of agents written in any
// language (docs/design.md §16).
//
// A Server ingests CloudEvents over HTTP (structured, binary and batch
// modes) into the embedded durable queue, answering 202 only once the
// events are committed there; runs a seqbox Consumer over that queue whose
// handler is either the built-in record handler or a dispatcher that POSTs
// each event to an agent, in order per key, with every gate applied; and
// serves Prometheus metrics, health checks, an admin JSON API (whose
// actions are operator requests executed by the server's own consumer,
// docs/design.md §9) and a dashboard of stuck keys.
package serve
